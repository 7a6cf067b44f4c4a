package storagebucket

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// memStore is an in-memory store of many buckets behind s3.Client, for the sweep's
// tests: buckets with tags, a policy, object versions and object lock. Any method it
// does not implement panics on the nil embedded interface.
type memStore struct {
	s3.Client
	mu      sync.Mutex
	buckets map[string]*memBucket
	// calls counts the calls by operation.
	calls map[string]int
}

type memBucket struct {
	tags     map[string]string
	policy   string
	versions []s3.ObjectVersion
	// locked versions are refused by DeleteObjects (AccessDenied), as object lock does.
	locked map[string]bool
	lock   bool
}

var _ s3.Client = (*memStore)(nil)

func newMemStore() *memStore {
	return &memStore{buckets: map[string]*memBucket{}, calls: map[string]int{}}
}

func (m *memStore) add(name string, tags map[string]string, policy string, keys ...string) *memBucket {
	b := &memBucket{tags: maps.Clone(tags), policy: policy, locked: map[string]bool{}}
	for _, k := range keys {
		b.versions = append(b.versions, s3.ObjectVersion{Key: k, VersionID: "v1"})
	}
	m.buckets[name] = b
	return b
}

func (m *memStore) bucket(op, name string) (*memBucket, error) {
	m.calls[op]++
	b := m.buckets[name]
	if b == nil {
		return nil, &s3.Error{Op: op, Bucket: name, Kind: s3.KindNotFound, StatusCode: 404}
	}
	return b, nil
}

func (m *memStore) count(op string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[op]
}

func (m *memStore) ListBuckets(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls["ListBuckets"]++
	return slices.Collect(maps.Keys(m.buckets)), nil
}

func (m *memStore) HeadBucket(_ context.Context, name string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := m.bucket("HeadBucket", name)
	return "", err
}

func (m *memStore) GetBucketTagging(_ context.Context, name string) (map[string]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := m.bucket("GetBucketTagging", name)
	if err != nil {
		return nil, err
	}
	out := maps.Clone(b.tags)
	if out == nil {
		out = map[string]string{}
	}
	return out, nil
}

func (m *memStore) PutBucketTagging(_ context.Context, name string, tags map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := m.bucket("PutBucketTagging", name)
	if err == nil {
		b.tags = maps.Clone(tags)
	}
	return err
}

func (m *memStore) GetBucketPolicy(_ context.Context, name string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := m.bucket("GetBucketPolicy", name)
	if err != nil {
		return "", err
	}
	return b.policy, nil
}

func (m *memStore) PutBucketPolicy(_ context.Context, name, policy string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := m.bucket("PutBucketPolicy", name)
	if err == nil {
		b.policy = policy
	}
	return err
}

func (m *memStore) DeleteBucketPolicy(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := m.bucket("DeleteBucketPolicy", name)
	if err == nil {
		b.policy = ""
	}
	return err
}

func (m *memStore) ListObjectVersions(_ context.Context, name string, _ *s3.PageToken) (s3.ObjectVersionPage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := m.bucket("ListObjectVersions", name)
	if err != nil {
		return s3.ObjectVersionPage{}, err
	}
	return s3.ObjectVersionPage{Versions: slices.Clone(b.versions)}, nil
}

func (m *memStore) DeleteObjects(_ context.Context, name string, ids []s3.ObjectID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := m.bucket("DeleteObjects", name)
	if err != nil {
		return err
	}
	failed := &s3.DeleteObjectsError{Bucket: name, Total: len(ids)}
	for _, id := range ids {
		if b.locked[id.Key] {
			failed.Failed = append(failed.Failed, s3.ObjectError{Key: id.Key, VersionID: id.VersionID, Code: "AccessDenied", Message: "locked"})
			continue
		}
		b.versions = slices.DeleteFunc(b.versions, func(v s3.ObjectVersion) bool { return v.Key == id.Key && v.VersionID == id.VersionID })
	}
	if len(failed.Failed) > 0 {
		return failed
	}
	return nil
}

func (m *memStore) ListMultipartUploads(_ context.Context, name string, _ *s3.UploadPageToken) (s3.MultipartUploadPage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := m.bucket("ListMultipartUploads", name)
	return s3.MultipartUploadPage{}, err
}

func (m *memStore) DeleteBucket(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := m.bucket("DeleteBucket", name)
	if err != nil {
		return err
	}
	if len(b.versions) > 0 {
		return &s3.Error{Op: "DeleteBucket", Bucket: name, Kind: s3.KindNotEmpty, StatusCode: 409}
	}
	delete(m.buckets, name)
	return nil
}

func (m *memStore) GetObjectLockConfiguration(_ context.Context, name string) (s3.ObjectLockConfig, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := m.bucket("GetObjectLockConfiguration", name)
	if err != nil {
		return s3.ObjectLockConfig{}, err
	}
	return s3.ObjectLockConfig{Enabled: b.lock}, nil
}

// writes counts the calls that change something.
func (m *memStore) writes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, op := range []string{"PutBucketTagging", "PutBucketPolicy", "DeleteBucketPolicy", "DeleteObjects", "DeleteBucket"} {
		n += m.calls[op]
	}
	return n
}

// lockedUntil is how long a locked version's Compliance retention runs: past any
// clock the tests use.
var lockedUntil = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

func (m *memStore) GetObjectRetention(_ context.Context, name, key, _ string) (s3.ObjectRetention, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := m.bucket("GetObjectRetention", name)
	if err != nil || !b.locked[key] {
		return s3.ObjectRetention{}, err
	}
	return s3.ObjectRetention{Mode: s3.RetentionCompliance, Until: lockedUntil}, nil
}

func (m *memStore) GetObjectLegalHold(_ context.Context, name, _, _ string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := m.bucket("GetObjectLegalHold", name)
	return false, err
}
