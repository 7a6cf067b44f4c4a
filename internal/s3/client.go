package s3

import (
	"context"
	"io"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/time/rate"
)

// Client is every S3 operation the operator performs. All methods return
// nil or an *Error (classify with KindOf); "configuration absent" answers
// are turned into empty results, not errors, so an Observe step can compare
// desired and actual state without special cases.
type Client interface {
	// ListBuckets returns the names of the identity's buckets, every page.
	ListBuckets(ctx context.Context) ([]string, error)
	// Ping sends one signed ListBuckets asking for a single bucket: the
	// store health check. Its answer proves the endpoint answers, TLS is
	// trusted and the signature was verified; one page keeps it cheap on an
	// account with very many buckets. KindAccessDenied means the credentials
	// were accepted but may not list buckets (s3:ListAllMyBuckets), which a
	// least-privilege identity often may not; KindInvalidCredentials means
	// the key is unknown or the signature wrong.
	Ping(ctx context.Context) error
	// CreateBucket creates bucket. A LocationConstraint is sent only when
	// region is neither "" nor "us-east-1" (AWS rejects that one
	// explicitly). Creating an existing bucket fails with
	// KindAlreadyOwnedByYou or KindBucketNameTaken depending on the store.
	CreateBucket(ctx context.Context, bucket, region string) error
	// HeadBucket checks that bucket exists and is accessible, and returns
	// its region when the store says (x-amz-bucket-region), else "".
	HeadBucket(ctx context.Context, bucket string) (region string, err error)
	// DeleteBucket deletes an empty bucket (KindNotEmpty otherwise).
	DeleteBucket(ctx context.Context, bucket string) error
	// BucketOwner returns the canonical ID of bucket's owner (its ACL's
	// Owner), "" when the store names none: what decides whether a bucket
	// without tags may be adopted.
	BucketOwner(ctx context.Context, bucket string) (string, error)
	// CallerOwner returns the canonical ID ListBuckets gives as the owner of
	// the caller's buckets. Whether it equals BucketOwner of those buckets
	// depends on the store (see owner.go).
	CallerOwner(ctx context.Context) (string, error)

	// GetBucketTagging returns the bucket's tags; no tags is an empty,
	// non-nil map.
	GetBucketTagging(ctx context.Context, bucket string) (map[string]string, error)
	// PutBucketTagging replaces all tags. An empty map deletes them, as
	// stores reject an empty TagSet.
	PutBucketTagging(ctx context.Context, bucket string, tags map[string]string) error
	DeleteBucketTagging(ctx context.Context, bucket string) error

	// GetBucketVersioning returns VersioningOff ("") for a bucket that
	// never had versioning, else VersioningEnabled or VersioningSuspended.
	GetBucketVersioning(ctx context.Context, bucket string) (VersioningStatus, error)
	// PutBucketVersioning sets Enabled or Suspended (S3 cannot turn
	// versioning off once enabled; VersioningOff is KindInvalid).
	PutBucketVersioning(ctx context.Context, bucket string, status VersioningStatus) error

	// GetBucketLifecycle returns the rules sorted by ID, nil when the bucket
	// has no lifecycle configuration. See LifecycleRule.
	GetBucketLifecycle(ctx context.Context, bucket string) ([]LifecycleRule, error)
	// PutBucketLifecycle replaces the configuration; no rules deletes it.
	PutBucketLifecycle(ctx context.Context, bucket string, rules []LifecycleRule) error
	DeleteBucketLifecycle(ctx context.Context, bucket string) error

	// GetPublicAccessBlock returns nil when the bucket has none.
	GetPublicAccessBlock(ctx context.Context, bucket string) (*PublicAccessBlock, error)
	PutPublicAccessBlock(ctx context.Context, bucket string, pab PublicAccessBlock) error
	DeletePublicAccessBlock(ctx context.Context, bucket string) error

	// GetBucketCors returns the bucket's CORS rules in order, nil when it has none
	// (cors.go).
	GetBucketCors(ctx context.Context, bucket string) ([]CORSRule, error)
	// PutBucketCors replaces the CORS configuration; no rules deletes it.
	PutBucketCors(ctx context.Context, bucket string, rules []CORSRule) error
	DeleteBucketCors(ctx context.Context, bucket string) error

	// GetBucketPolicy returns the policy JSON as the store returns it, ""
	// when there is none. Stores reformat policies; compare with
	// EquivalentPolicies. PutBucketPolicy with "" deletes the policy.
	GetBucketPolicy(ctx context.Context, bucket string) (string, error)
	PutBucketPolicy(ctx context.Context, bucket, policy string) error
	DeleteBucketPolicy(ctx context.Context, bucket string) error

	// ListObjectVersions returns one page of object versions and delete
	// markers, starting at page (nil for the first page). Page.Next is nil
	// on the last page. Stores that cannot list versions are listed with
	// ListObjectsV2 instead and every entry has VersionID "".
	ListObjectVersions(ctx context.Context, bucket string, page *PageToken) (ObjectVersionPage, error)
	// DeleteObjects deletes the given versions in batches of at most
	// MaxDeleteBatch. Per-key failures are aggregated into a
	// *DeleteObjectsError; deleting a missing key is not a failure.
	DeleteObjects(ctx context.Context, bucket string, objects []ObjectID) error

	// ListMultipartUploads returns one page of the bucket's incomplete
	// multipart uploads, starting at page (nil for the first); Next is nil
	// on the last page.
	ListMultipartUploads(ctx context.Context, bucket string, page *UploadPageToken) (MultipartUploadPage, error)
	// AbortMultipartUpload discards an incomplete upload and its parts; an
	// upload already gone (NoSuchUpload) is not a failure.
	AbortMultipartUpload(ctx context.Context, bucket, key, uploadID string) error

	// PutObject, GetObject and DeleteObject serve the small canary object
	// used to prove that a bucket really accepts data.
	PutObject(ctx context.Context, bucket, key string, body []byte) error
	// GetObject reads at most maxBytes; a larger object fails with
	// KindInvalid wrapping ErrObjectTooLarge.
	GetObject(ctx context.Context, bucket, key string, maxBytes int64) ([]byte, error)
	DeleteObject(ctx context.Context, bucket, key string) error
	// PurgeObject deletes every version and delete marker of key.
	PurgeObject(ctx context.Context, bucket, key string) error

	// The data plane of objects, what moving a bucket to another store reads and
	// writes (objectdata.go, listrange.go, multipart.go). Streamed calls have a
	// deadline of RequestTimeout plus their bytes at MinTransferRate.

	// ListRange lists one page of objects (or versions and delete markers) after a
	// key, with sizes and ETags, in the store's order.
	ListRange(ctx context.Context, bucket string, opts RangeOptions, page *PageToken) (EntryPage, error)
	// ReadObject reads an object's selected bytes into buf within one deadline.
	ReadObject(ctx context.Context, bucket, key string, req ReadRequest, buf []byte) (ObjectInfo, int, error)
	// OpenObject starts a GET whose body (length bytes) the caller streams and closes.
	OpenObject(ctx context.Context, bucket, key string, req ReadRequest, length int64) (ObjectInfo, io.ReadCloser, error)
	// HeadObject reads an object's metadata, or a part's length by part number.
	HeadObject(ctx context.Context, bucket, key string, req ReadRequest) (ObjectInfo, error)
	GetObjectTagging(ctx context.Context, bucket, key, versionID string) (map[string]string, error)
	// WriteObject writes an object with its metadata and tags; a body that is not
	// an io.ReadSeeker is streamed once, unsigned.
	WriteObject(ctx context.Context, bucket, key string, meta ObjectMeta, body io.Reader, size int64, contentMD5 string) (WriteResult, error)
	CreateMultipartUpload(ctx context.Context, bucket, key string, meta ObjectMeta) (string, error)
	UploadPart(ctx context.Context, bucket, key, uploadID string, number int32, body io.Reader, size int64, contentMD5 string) (string, error)
	ListParts(ctx context.Context, bucket, key, uploadID string) ([]Part, error)
	CompleteMultipartUpload(ctx context.Context, bucket, key, uploadID string, parts []Part) (WriteResult, error)

	// Object lock (lock.go).
	//
	// CreateBucketWithObjectLock is CreateBucket with object lock enabled (and so
	// versioning).
	CreateBucketWithObjectLock(ctx context.Context, bucket, region string) error
	// GetObjectLockConfiguration returns the bucket's object lock; a bucket without
	// it is the zero ObjectLockConfig, not an error.
	GetObjectLockConfiguration(ctx context.Context, bucket string) (ObjectLockConfig, error)
	// PutObjectLockConfiguration turns object lock on (where the store can, on a
	// versioned bucket) and sets or removes its default retention.
	PutObjectLockConfiguration(ctx context.Context, bucket string, cfg ObjectLockConfig) error
	// GetObjectRetention returns a version's retention (Mode "" for none) and
	// GetObjectLegalHold whether a legal hold is on it.
	GetObjectRetention(ctx context.Context, bucket, key, versionID string) (ObjectRetention, error)
	GetObjectLegalHold(ctx context.Context, bucket, key, versionID string) (bool, error)
	// PutObjectRetention sets a version's retention (bypassGovernance: asking to
	// change a Governance one otherwise than lengthening it); PutObjectLegalHold
	// turns its legal hold on or off. Only a move calls them, to give a copied
	// version the source's lock.
	PutObjectRetention(ctx context.Context, bucket, key, versionID string, r ObjectRetention, bypassGovernance bool) error
	PutObjectLegalHold(ctx context.Context, bucket, key, versionID string, on bool) error
	// DeleteObjectsBypassingGovernance is DeleteObjects, deleting versions under
	// Governance retention too.
	DeleteObjectsBypassingGovernance(ctx context.Context, bucket string, objects []ObjectID) error
}

// VersioningStatus is a bucket's versioning state as S3 reports it.
type VersioningStatus string

// Versioning states.
const (
	VersioningOff       VersioningStatus = ""
	VersioningEnabled   VersioningStatus = "Enabled"
	VersioningSuspended VersioningStatus = "Suspended"
)

// LifecycleRule is the subset of S3 lifecycle the operator manages. Every
// rule is written Enabled with a prefix Filter; nil day counts are absent
// actions. ID should be set: a store invents one otherwise, and the rule
// would never compare equal on the next read.
//
// A rule read from a bucket may use more of S3 lifecycle than these fields
// say (transitions, tag or size filters, dates): such a rule carries the
// store's own form too, and PutBucketLifecycle sends that form back
// unchanged. S3 replaces a lifecycle configuration as a whole, so this is what
// lets the operator write its own rules next to someone else's without
// altering theirs. Such a rule never compares equal to one built from fields.
type LifecycleRule struct {
	ID                                 string
	Prefix                             string
	ExpirationDays                     *int32
	NoncurrentVersionExpirationDays    *int32
	AbortIncompleteMultipartUploadDays *int32
	// Disabled: the store keeps the rule but does not run it. The operator
	// writes enabled rules only; disabled ones are read so that writing the
	// configuration back keeps them.
	Disabled bool

	// verbatim is the rule as the store returned it, when the fields above do
	// not describe it completely; nil otherwise.
	verbatim *types.LifecycleRule
}

// Verbatim says whether the rule uses parts of S3 lifecycle the fields do not
// model, so it is carried (and written back) in the store's own form.
func (r LifecycleRule) Verbatim() bool { return r.verbatim != nil }

// PublicAccessBlock mirrors S3's PublicAccessBlockConfiguration.
type PublicAccessBlock struct {
	BlockPublicAcls       bool
	IgnorePublicAcls      bool
	BlockPublicPolicy     bool
	RestrictPublicBuckets bool
}

// ObjectID names one object version to delete; an empty VersionID deletes
// the current version (or adds a delete marker on a versioned bucket).
type ObjectID struct {
	Key       string
	VersionID string
}

// ObjectVersion is one entry of a version listing.
type ObjectVersion struct {
	Key            string
	VersionID      string
	IsDeleteMarker bool
	IsLatest       bool
}

// PageToken resumes a listing. Its fields are opaque to callers.
type PageToken struct {
	KeyMarker         string
	VersionIDMarker   string
	ContinuationToken string
	// Unversioned is set once the store turned out not to support version
	// listing, so the following pages use ListObjectsV2.
	Unversioned bool
}

// ObjectVersionPage is one page of ListObjectVersions.
type ObjectVersionPage struct {
	Versions []ObjectVersion
	Next     *PageToken
}

// MaxDeleteBatch is S3's limit of keys per DeleteObjects request.
const MaxDeleteBatch = 1000

// client implements Client over the AWS SDK.
type client struct {
	api     *awss3.Client
	limiter *rate.Limiter
	timeout time.Duration
	// minRate is the slowest transfer, in bytes per second, a streamed call's
	// deadline allows for (Config.MinTransferRate).
	minRate int64
	redact  redactor
}

var _ Client = (*client)(nil)

// call runs fn under the per-call timeout and turns its error into an
// *Error carrying op, bucket and key.
func (c *client) call(ctx context.Context, op, bucket, key string, fn func(context.Context) error) error {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	return c.redact.wrap(op, bucket, key, fn(ctx))
}

// invalid builds a KindInvalid *Error for arguments refused before any
// request is sent.
func invalid(op, bucket, msg string) error {
	return &Error{Op: op, Bucket: bucket, Kind: KindInvalid, msg: msg}
}
