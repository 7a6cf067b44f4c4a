package s3

import (
	"cmp"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// retentionPerVersion says whether a store gives each version written under a bucket's
// default retention a retention of its own, as AWS does (SeaweedFS, Ceph RGW, MinIO). Versity
// gives none: its default retention locks every version of the bucket, those written
// before it too, for its period counted from when it was set (docs/object-lock.md).
var retentionPerVersion = map[testenv.S3Kind]bool{testenv.SeaweedFS: true, testenv.Versity: false, testenv.RGW: true, testenv.MinIO: true}

// lockContract pins the object lock calls on each store: a bucket created locked, its
// default retention round-tripped and removed, a version locked by it refused to
// DeleteObjects (and still, once the default retention is removed, where the version has
// a retention of its own) and deleted when bypassing Governance, and object lock turned
// on for an existing bucket once it is versioned (refused before: InvalidBucketState).
// MinIO refuses a locked version per key as InvalidRequest ("Object is WORM protected"),
// not AccessDenied, and object lock for an existing bucket altogether (InvalidBucketState).
func lockContract(ctx context.Context, t *testing.T, s *store) {
	b := s.bucket(t)
	must(t, "CreateBucketWithObjectLock", s.c.CreateBucketWithObjectLock(ctx, b, ""))
	t.Cleanup(func() { emptyBypassing(t, s, b) }) // before s.bucket's cleanup
	cfg, err := s.c.GetObjectLockConfiguration(ctx, b)
	must(t, "GetObjectLockConfiguration", err)
	if !cfg.Enabled || cfg.DefaultRetention != nil {
		t.Errorf("a new locked bucket: %+v, want enabled without a default retention", cfg)
	}
	v, err := s.c.GetBucketVersioning(ctx, b)
	if err != nil || v != VersioningEnabled {
		t.Errorf("versioning of a locked bucket: %q, %v; want Enabled", v, err)
	}
	wantKind(t, s, "suspending versioning of a locked bucket", s.c.PutBucketVersioning(ctx, b, VersioningSuspended), KindInvalid)

	want := &DefaultRetention{Mode: RetentionGovernance, Days: 1}
	must(t, "PutObjectLockConfiguration", s.c.PutObjectLockConfiguration(ctx, b, ObjectLockConfig{Enabled: true, DefaultRetention: want}))
	cfg, err = s.c.GetObjectLockConfiguration(ctx, b)
	must(t, "GetObjectLockConfiguration", err)
	if !cfg.Enabled || cfg.DefaultRetention == nil || *cfg.DefaultRetention != *want {
		t.Errorf("default retention read back as %+v, want %+v", cfg, want)
	}

	written := time.Now()
	must(t, "PutObject", s.c.PutObject(ctx, b, "kept", []byte("kept")))
	page, err := s.c.ListObjectVersions(ctx, b, nil)
	must(t, "ListObjectVersions", err)
	if len(page.Versions) != 1 {
		t.Fatalf("versions: %+v", page.Versions)
	}
	id := ObjectID{Key: "kept", VersionID: page.Versions[0].VersionID}
	ret, err := s.c.GetObjectRetention(ctx, b, id.Key, id.VersionID)
	must(t, "GetObjectRetention", err)
	answer(t, s, "GetObjectRetention of a version written under a default retention", err)
	if retentionPerVersion[s.kind] {
		if ret.Mode != RetentionGovernance || ret.Until.Before(written.Add(23*time.Hour)) || ret.Until.After(time.Now().Add(25*time.Hour)) {
			t.Errorf("retention %+v, want Governance for a day from the write", ret)
		}
	} else if ret.Mode != "" {
		t.Errorf("retention %+v, want none: this store keeps no retention per version", ret)
	}
	hold, err := s.c.GetObjectLegalHold(ctx, b, id.Key, id.VersionID)
	if err != nil || hold {
		t.Errorf("legal hold of a version without one: %v, %v", hold, err)
	}

	err = s.c.DeleteObjects(ctx, b, []ObjectID{id})
	var failed *DeleteObjectsError
	if refusal := cmp.Or(s.expect.lockedDelete, KindAccessDenied); !errors.As(err, &failed) || len(failed.Failed) != 1 || KindOf(err) != refusal {
		t.Errorf("DeleteObjects of a locked version: %v, want one %v", err, refusal)
	} else if !failed.Failed[0].MayBeLock() {
		t.Errorf("DeleteObjects of a locked version: %+v, which a purge would not read as a lock (ObjectError.MayBeLock)", failed.Failed[0])
	}
	answer(t, s, "DeleteObjects of a locked version", err)

	// Removing the default retention leaves a version its own retention; where it has
	// none (Versity), nothing locks it any more.
	must(t, "removing the default retention", s.c.PutObjectLockConfiguration(ctx, b, ObjectLockConfig{Enabled: true}))
	cfg, err = s.c.GetObjectLockConfiguration(ctx, b)
	if err != nil || !cfg.Enabled || cfg.DefaultRetention != nil {
		t.Errorf("after removing the default retention: %+v, %v", cfg, err)
	}
	err = s.c.DeleteObjects(ctx, b, []ObjectID{id})
	answer(t, s, "DeleteObjects of that version once the default retention is removed", err)
	if locked := err != nil; locked != retentionPerVersion[s.kind] {
		t.Errorf("the version once the default retention is removed: %v, want locked %v", err, retentionPerVersion[s.kind])
	} else if locked {
		must(t, "DeleteObjectsBypassingGovernance", s.c.DeleteObjectsBypassingGovernance(ctx, b, []ObjectID{id}))
	}
	wantKind(t, s, "turning object lock off", s.c.PutObjectLockConfiguration(ctx, b, ObjectLockConfig{}), KindInvalid)

	plain := s.bucket(t)
	must(t, "CreateBucket", s.c.CreateBucket(ctx, plain, ""))
	cfg, err = s.c.GetObjectLockConfiguration(ctx, plain)
	if err != nil || cfg.Enabled {
		t.Errorf("object lock of a plain bucket: %+v, %v; want none", cfg, err)
	}
	err = s.c.PutObjectLockConfiguration(ctx, plain, ObjectLockConfig{Enabled: true})
	wantKind(t, s, "object lock on an unversioned bucket", err, KindInvalid)
	must(t, "PutBucketVersioning", s.c.PutBucketVersioning(ctx, plain, VersioningEnabled))
	err = s.c.PutObjectLockConfiguration(ctx, plain, ObjectLockConfig{Enabled: true})
	if s.expect.lockOnExisting != KindUnknown {
		wantKind(t, s, "object lock on a versioned bucket", err, s.expect.lockOnExisting)
		return
	}
	must(t, "object lock on a versioned bucket", err)
	cfg, err = s.c.GetObjectLockConfiguration(ctx, plain)
	if err != nil || !cfg.Enabled {
		t.Errorf("object lock turned on for an existing bucket: %+v, %v", cfg, err)
	}
}

// emptyBypassing deletes every version of a Governance-locked bucket.
func emptyBypassing(t *testing.T, s *store, bucket string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	page, err := s.c.ListObjectVersions(ctx, bucket, nil)
	if err != nil {
		return
	}
	var ids []ObjectID
	for _, v := range page.Versions {
		ids = append(ids, ObjectID{Key: v.Key, VersionID: v.VersionID})
	}
	if err := s.c.DeleteObjectsBypassingGovernance(ctx, bucket, ids); err != nil {
		t.Errorf("cleanup: emptying locked bucket %s: %v", bucket, err)
	}
}
