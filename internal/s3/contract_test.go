package s3

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go/middleware"

	"github.com/bucketkeeper/bucketkeeper/internal/awspolicy"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// The contract tests run the same table against real SeaweedFS, Versity S3
// Gateway, Ceph RGW and MinIO servers (test/testenv), one server per kind for the whole
// binary, and pin what each one really answers. When a server upgrade
// changes an answer, the table below is where it shows.

// expectations are the per-server answers that legitimately differ.
// A zero Kind means "supported, must succeed".
type expectations struct {
	createOwnAgain Kind // CreateBucket on a bucket we already own
	createOthers   Kind // CreateBucket on a bucket the second identity created
	// missingBucketUntagged: GetBucketTagging of a missing bucket answers NoSuchTagSet,
	// which reads as a bucket without tags, not NotFound (MinIO).
	missingBucketUntagged bool
	lifecycle             Kind // PutBucketLifecycleConfiguration
	// abortUploadsDropped: the store has no AbortIncompleteMultipartUpload: a rule of
	// it alone is refused (Invalid), and beside another action it is dropped (MinIO).
	abortUploadsDropped bool
	publicAccessBlock   Kind // GetPublicAccessBlock, which the operator reads before any write
	// publicAccessBlockPut is what PutPublicAccessBlock answers on a store without
	// one, where it is not publicAccessBlock's kind.
	publicAccessBlockPut Kind
	// publicAccessBlockDeleteDeletesBucket: DELETE ?publicAccessBlock reaches the
	// store's DeleteBucket, which deletes the bucket when it is empty (MinIO).
	publicAccessBlockDeleteDeletesBucket bool
	// cors is what a store without bucket CORS answers: its GET, or its PUT where
	// the GET reads as "none".
	cors              Kind
	ignoresMaxBuckets bool   // ListBuckets answers every bucket whatever max-buckets says
	putOverMarkerLost bool   // a PUT over a delete marker (versioned bucket) is acknowledged and lost
	owners            string // what BucketOwners tells of own and the second identity's buckets
	// lockedDelete is the per-key refusal of DeleteObjects for a version an object
	// lock keeps, where it is not AccessDenied.
	lockedDelete Kind
	// lockOnExisting is what turning object lock on for an existing, versioned
	// bucket answers, where the store refuses it.
	lockOnExisting Kind
}

// What BucketOwners tells, per store (the "bucket owners" case).
const (
	// ownersByAccount: the caller's bucket is owned by the ID ListBuckets gives for
	// the caller, the second identity's by another: adoption checks against it.
	ownersByAccount = "ListBuckets' owner"
	// ownersSameAccount: as ownersByAccount, but the second identity is of the
	// caller's own account, so its buckets are the caller's too.
	ownersSameAccount = "ListBuckets' owner (the second identity is an IAM user of the same account, so its buckets are adoptable)"
	// ownersNotComparable: the bucket's owner is an account while ListBuckets names
	// the caller's identity, so only the store admin can say which owner is ours.
	ownersNotComparable = "`guardrails.adoptionBucketOwner`: ACLs name the account, ListBuckets the identity"
	// ownersNone: the bucket's ACL names no owner, so nothing the store answers can
	// say a bucket is the operator's account's: only the store admin's statement that
	// the store has one account can (guardrails.adoptionSingleAccount).
	ownersNone = "nothing: ACLs name no owner, so a bucket is adopted only where `guardrails.adoptionSingleAccount` states the store has one account"
)

// Common to all four (SeaweedFS mini at hack/peers' pinned version, versitygw
// v1.8.0 posix with --versioning-dir, radosgw 20.2 of Debian's testing suite
// with accounts, MinIO's last commit over one drive): a missing bucket 404
// NoSuchBucket (HEAD: bare 404; MinIO's GetBucketTagging: NoSuchTagSet), a
// non-empty one 409 BucketNotEmpty, a wrong secret 403 SignatureDoesNotMatch
// and an unknown key 403 InvalidAccessKeyId (on the S3 API Versity does not use
// XAdminUserNotFound, which is its admin API's answer; the classifier still maps
// it). All round-trip tagging, versioning, policy (SeaweedFS rewrites
// one-element arrays as scalars, see EquivalentPolicies), the canary and version
// listing with delete markers. RGW alone: HEAD of another account's bucket is a
// bare 403 (the others answer 200: their second identity sees it), and a
// malformed policy is 400 InvalidArgument (the others: MalformedPolicy). Like
// SeaweedFS and MinIO, and unlike Versity, its HeadBucket sends no region header.
var contractExpect = map[testenv.S3Kind]expectations{
	testenv.SeaweedFS: {
		createOwnAgain:    KindAlreadyOwnedByYou, // 409 BucketAlreadyOwnedByYou
		createOthers:      KindBucketNameTaken,   // 409 BucketAlreadyExists: another account
		lifecycle:         KindUnknown,           // supported, round-trips
		publicAccessBlock: KindUnknown,           // supported, round-trips
		owners:            ownersNotComparable,   // "bucketkeeper" (account) vs "bucketkeeper-admin" (identity)
	},
	testenv.Versity: {
		createOwnAgain:    KindAlreadyOwnedByYou, // 409 BucketAlreadyOwnedByYou
		createOthers:      KindAlreadyOwnedByYou, // the second identity is an IAM user of root's account
		lifecycle:         KindNotImplemented,    // 501 NotImplemented (Get and Put)
		publicAccessBlock: KindNotImplemented,    // 501 NotImplemented (Get and Put)
		owners:            ownersSameAccount,     // root's access key owns both
		putOverMarkerLost: true,                  // lists as a second delete marker, GET answers NoSuchKey
	},
	testenv.RGW: {
		createOwnAgain:    KindUnknown,         // 200 OK, as AWS answers in us-east-1
		createOthers:      KindBucketNameTaken, // 409 BucketAlreadyExists: another Ceph account
		lifecycle:         KindUnknown,         // supported, round-trips
		publicAccessBlock: KindUnknown,         // supported, round-trips
		ignoresMaxBuckets: true,                // one page of every bucket, no continuation token
		owners:            ownersNotComparable, // the account "RGW…" owns, ListBuckets names the user
	},
	testenv.MinIO: {
		createOwnAgain:        KindAlreadyOwnedByYou, // 409 BucketAlreadyOwnedByYou
		createOthers:          KindAlreadyOwnedByYou, // the second identity is a session of root's
		missingBucketUntagged: true,                  // 404 NoSuchTagSet, as for a bucket without tags
		lifecycle:             KindUnknown,           // supported, round-trips, but for:
		abortUploadsDropped:   true,                  // alone 400 InvalidArgument, else not kept
		publicAccessBlock:     KindNotImplemented,    // GET 501 NotImplemented
		publicAccessBlockPut:  KindInvalid,           // PUT routed to its PutBucket: 400 MalformedXML
		// DELETE routed to its DeleteBucket: 204, the bucket gone (409 BucketNotEmpty
		// when it holds objects).
		publicAccessBlockDeleteDeletesBucket: true,
		ignoresMaxBuckets:                    true,               // every bucket in one page, no continuation token
		owners:                               ownersNone,         // <Owner><ID></ID>; ListBuckets names its root "02d6…"
		lockedDelete:                         KindInvalid,        // InvalidRequest: "Object is WORM protected"
		lockOnExisting:                       KindInvalid,        // 409 InvalidBucketState, versioned or not
		cors:                                 KindNotImplemented, // GET 404 NoSuchCORSConfiguration, PUT and DELETE 501
	},
}

// store is one running server and clients for it.
type store struct {
	kind   testenv.S3Kind
	srv    *testenv.S3Server
	cfg    Config // admin identity
	c      Client
	obs    *observed
	expect expectations
	// wrongSecretPing is the "wrong secret" case's health check answer, for the
	// table row the "unknown access key" case completes.
	wrongSecretPing string
}

// contractRequests records every request of the contract's clients, which must all
// be ones whose AWS actions internal/awspolicy lists.
var contractRequests = &awspolicy.Recorder{}

// client builds another Client for this store with cfg modified.
func (s *store) client(t *testing.T, mod func(*Config)) (Client, *observed) {
	t.Helper()
	cfg := s.cfg
	obs := &observed{}
	cfg.Observer = obs.observe
	cfg.APIOptions = []func(*middleware.Stack) error{contractRequests.Middleware}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, obs
}

// bucket returns a fresh bucket name and deletes the bucket (emptied) when
// the subtest ends.
func (s *store) bucket(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := strings.ToLower(fmt.Sprintf("bk-%.30s-%s", strings.ReplaceAll(t.Name()[strings.LastIndex(t.Name(), "/")+1:], "_", "-"), hex.EncodeToString(b)))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := emptyBucket(ctx, s.c, name); err != nil && KindOf(err) != KindNotFound {
			t.Errorf("cleanup: empty %s: %v", name, err)
		}
		if err := s.c.DeleteBucket(ctx, name); err != nil && KindOf(err) != KindNotFound {
			t.Errorf("cleanup: delete %s: %v", name, err)
		}
	})
	return name
}

// emptyBucket deletes every version and delete marker, page by page.
func emptyBucket(ctx context.Context, c Client, bucket string) error {
	var page *PageToken
	for range 100 {
		res, err := c.ListObjectVersions(ctx, bucket, page)
		if err != nil {
			return err
		}
		ids := make([]ObjectID, 0, len(res.Versions))
		for _, v := range res.Versions {
			ids = append(ids, ObjectID{Key: v.Key, VersionID: v.VersionID})
		}
		if err := c.DeleteObjects(ctx, bucket, ids); err != nil {
			return err
		}
		if page = res.Next; page == nil {
			return nil
		}
	}
	return errors.New("too many pages")
}

// answer logs what the server really said, in one greppable format, and
// returns the error's kind.
func answer(t *testing.T, s *store, what string, err error) Kind {
	t.Helper()
	var e *Error
	switch {
	case err == nil:
		t.Logf("ANSWER %s | %s | ok", s.kind, what)
	case errors.As(err, &e):
		t.Logf("ANSWER %s | %s | %s | HTTP %d | %s", s.kind, what, e.Code, e.StatusCode, e.Kind)
	default:
		t.Logf("ANSWER %s | %s | %T %v", s.kind, what, err, err)
	}
	return KindOf(err)
}

// wantKind asserts err's kind and logs the real answer.
func wantKind(t *testing.T, s *store, what string, err error, want Kind) {
	t.Helper()
	if got := answer(t, s, what, err); err == nil || got != want {
		t.Errorf("%s: kind %v, want %v (err: %v)", what, got, want, err)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestContract(t *testing.T) {
	kinds := []testenv.S3Kind{testenv.SeaweedFS, testenv.Versity, testenv.RGW, testenv.MinIO}
	// Cleanups run once every (parallel) subtest is done.
	t.Cleanup(func() { observedTable.Check(t, kinds) })
	t.Cleanup(func() {
		for _, missing := range contractRequests.Missing() {
			t.Errorf("the client sent %s (add the action to internal/awspolicy, then make docs)", missing)
		}
	})
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			begin := time.Now()
			srv := testenv.NewS3(t, kind)
			t.Logf("%s ready in %v", kind, time.Since(begin).Round(time.Millisecond))
			s := &store{kind: kind, srv: srv, expect: contractExpect[kind]}
			s.cfg = Config{
				Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
				AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey,
				RequestTimeout: 30 * time.Second,
			}
			s.c, s.obs = s.client(t, nil)
			for _, tc := range contractCases {
				t.Run(tc.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					start := time.Now()
					tc.run(ctx, t, s)
					t.Logf("%s/%s took %v", kind, tc.name, time.Since(start).Round(time.Millisecond))
				})
			}
		})
	}
}
