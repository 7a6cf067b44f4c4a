package storagebucket

import (
	"context"
	"maps"
	"slices"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// fakeS3 is an in-memory bucket configuration behind s3.Client. Only the configuration
// methods and the bucket's own (head, create, delete) are implemented; any other method
// panics on the nil embedded interface.
type fakeS3 struct {
	s3.Client

	// absent: the bucket does not exist.
	absent bool

	versioning s3.VersioningStatus
	tags       map[string]string
	lifecycle  []s3.LifecycleRule
	pab        *s3.PublicAccessBlock
	policy     string
	cors       []s3.CORSRule
	lock       s3.ObjectLockConfig
	// lockOnExisting: PutObjectLockConfiguration may turn object lock on (else it
	// answers InvalidBucketState, as a store that cannot lock an existing bucket).
	lockOnExisting bool
	// keepsNoAbortUploads: PutBucketLifecycle takes a rule's
	// AbortIncompleteMultipartUploadDays beside another action and drops it, as MinIO
	// does.
	keepsNoAbortUploads bool

	// errs makes the named method fail with the given error (state left unchanged).
	errs map[string]error
	// reads and writes list the methods called, in order; a failed write is listed too.
	reads, writes []string
}

var _ s3.Client = (*fakeS3)(nil)

func (f *fakeS3) read(op string) error {
	f.reads = append(f.reads, op)
	return f.errs[op]
}

func (f *fakeS3) write(op string) error {
	f.writes = append(f.writes, op)
	return f.errs[op]
}

func (f *fakeS3) HeadBucket(_ context.Context, bucket string) (string, error) {
	if err := f.read("HeadBucket"); err != nil {
		return "", err
	}
	if f.absent {
		return "", &s3.Error{Op: "HeadBucket", Bucket: bucket, Kind: s3.KindNotFound, StatusCode: 404}
	}
	return "", nil
}

func (f *fakeS3) CreateBucket(_ context.Context, bucket, _ string) error {
	if err := f.write("CreateBucket"); err != nil {
		return err
	}
	if !f.absent {
		return &s3.Error{Op: "CreateBucket", Bucket: bucket, Kind: s3.KindAlreadyOwnedByYou, Code: "BucketAlreadyOwnedByYou", StatusCode: 409}
	}
	f.absent, f.tags = false, nil
	return nil
}

func (f *fakeS3) DeleteBucket(_ context.Context, bucket string) error {
	if err := f.write("DeleteBucket"); err != nil {
		return err
	}
	if f.absent {
		return &s3.Error{Op: "DeleteBucket", Bucket: bucket, Kind: s3.KindNotFound, Code: "NoSuchBucket", StatusCode: 404}
	}
	f.absent, f.tags = true, nil
	return nil
}

func (f *fakeS3) GetBucketVersioning(_ context.Context, _ string) (s3.VersioningStatus, error) {
	if err := f.read("GetBucketVersioning"); err != nil {
		return "", err
	}
	return f.versioning, nil
}

func (f *fakeS3) PutBucketVersioning(_ context.Context, _ string, status s3.VersioningStatus) error {
	if err := f.write("PutBucketVersioning"); err != nil {
		return err
	}
	f.versioning = status
	return nil
}

func (f *fakeS3) GetBucketTagging(_ context.Context, _ string) (map[string]string, error) {
	if err := f.read("GetBucketTagging"); err != nil {
		return nil, err
	}
	out := maps.Clone(f.tags)
	if out == nil {
		out = map[string]string{} // the interface promises a non-nil map
	}
	return out, nil
}

func (f *fakeS3) PutBucketTagging(_ context.Context, _ string, tags map[string]string) error {
	if err := f.write("PutBucketTagging"); err != nil {
		return err
	}
	f.tags = maps.Clone(tags)
	return nil
}

func (f *fakeS3) GetBucketLifecycle(_ context.Context, _ string) ([]s3.LifecycleRule, error) {
	if err := f.read("GetBucketLifecycle"); err != nil {
		return nil, err
	}
	if len(f.lifecycle) == 0 {
		return nil, nil
	}
	// Stores do not keep rule order; the real client sorts, the fake returns them as
	// stored so the setting's own sorting is exercised too.
	return slices.Clone(f.lifecycle), nil
}

func (f *fakeS3) PutBucketLifecycle(_ context.Context, _ string, rules []s3.LifecycleRule) error {
	if err := f.write("PutBucketLifecycle"); err != nil {
		return err
	}
	f.lifecycle = slices.Clone(rules)
	if f.keepsNoAbortUploads {
		for i := range f.lifecycle {
			f.lifecycle[i].AbortIncompleteMultipartUploadDays = nil
		}
	}
	return nil
}

func (f *fakeS3) DeleteBucketLifecycle(_ context.Context, _ string) error {
	if err := f.write("DeleteBucketLifecycle"); err != nil {
		return err
	}
	f.lifecycle = nil
	return nil
}

func (f *fakeS3) GetPublicAccessBlock(_ context.Context, _ string) (*s3.PublicAccessBlock, error) {
	if err := f.read("GetPublicAccessBlock"); err != nil {
		return nil, err
	}
	if f.pab == nil {
		return nil, nil
	}
	c := *f.pab
	return &c, nil
}

func (f *fakeS3) PutPublicAccessBlock(_ context.Context, _ string, pab s3.PublicAccessBlock) error {
	if err := f.write("PutPublicAccessBlock"); err != nil {
		return err
	}
	f.pab = &pab
	return nil
}

func (f *fakeS3) DeletePublicAccessBlock(_ context.Context, _ string) error {
	if err := f.write("DeletePublicAccessBlock"); err != nil {
		return err
	}
	f.pab = nil
	return nil
}

func (f *fakeS3) GetBucketPolicy(_ context.Context, _ string) (string, error) {
	if err := f.read("GetBucketPolicy"); err != nil {
		return "", err
	}
	return f.policy, nil
}

func (f *fakeS3) PutBucketPolicy(_ context.Context, _ string, policy string) error {
	if err := f.write("PutBucketPolicy"); err != nil {
		return err
	}
	f.policy = policy
	return nil
}

func (f *fakeS3) DeleteBucketPolicy(_ context.Context, _ string) error {
	if err := f.write("DeleteBucketPolicy"); err != nil {
		return err
	}
	f.policy = ""
	return nil
}

func (f *fakeS3) GetBucketCors(_ context.Context, _ string) ([]s3.CORSRule, error) {
	if err := f.read("GetBucketCors"); err != nil {
		return nil, err
	}
	return slices.Clone(f.cors), nil
}

func (f *fakeS3) PutBucketCors(_ context.Context, _ string, rules []s3.CORSRule) error {
	if err := f.write("PutBucketCors"); err != nil {
		return err
	}
	f.cors = slices.Clone(rules)
	return nil
}

func (f *fakeS3) DeleteBucketCors(_ context.Context, _ string) error {
	if err := f.write("DeleteBucketCors"); err != nil {
		return err
	}
	f.cors = nil
	return nil
}

func (f *fakeS3) GetObjectLockConfiguration(_ context.Context, _ string) (s3.ObjectLockConfig, error) {
	if err := f.read("GetObjectLockConfiguration"); err != nil {
		return s3.ObjectLockConfig{}, err
	}
	return f.lock, nil
}

func (f *fakeS3) PutObjectLockConfiguration(_ context.Context, _ string, cfg s3.ObjectLockConfig) error {
	if err := f.write("PutObjectLockConfiguration"); err != nil {
		return err
	}
	if !f.lock.Enabled && (!f.lockOnExisting || f.versioning != s3.VersioningEnabled) {
		return &s3.Error{Op: "PutObjectLockConfiguration", Bucket: "b", Kind: s3.KindInvalid, Code: "InvalidBucketState", StatusCode: 409}
	}
	f.lock = cfg
	return nil
}

func notImplemented(op string) error {
	return &s3.Error{Op: op, Bucket: "b", Kind: s3.KindNotImplemented, Code: "NotImplemented", StatusCode: 501}
}

func s3Err(op string, kind s3.Kind) error { return &s3.Error{Op: op, Bucket: "b", Kind: kind} }

var fullBlock = s3.PublicAccessBlock{BlockPublicAcls: true, IgnorePublicAcls: true, BlockPublicPolicy: true, RestrictPublicBuckets: true}
