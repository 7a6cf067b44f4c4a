package mover_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bucketkeeper/bucketkeeper/internal/mover"
)

// TestUnreadableObjectStopsBeforeVerified: on RGW a bucket policy denies reading one
// key, to the bucket's owner too. The final pass copies every other object but is not
// verified: its failures count one key and name it with the store's answer, and the
// verifying listing finds it missing. Once the key can be read, the next pass is
// verified.
func TestUnreadableObjectStopsBeforeVerified(t *testing.T) {
	ctx := context.Background()
	objs := mixedObjects("readable", 60, nil)
	denied := object{key: "secret/denied.bin", size: 1234}
	src, tgt := newBucket(t, rgw, false), newBucket(t, seaweed, false)
	src.putAll(t, append(objs, denied))
	admin := storeClient(t, rgw)
	policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::%s/%s"}]}`, src.bucket, denied.key)
	if err := admin.PutBucketPolicy(ctx, src.bucket, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.PutBucketPolicy(context.Background(), src.bucket, "") })

	f := newMove(t, src, tgt, mover.VersionsCurrent)
	p := f.run(mover.ModeFinal, 1)
	if p.Verified {
		t.Fatal("a pass that could not read a key is verified")
	}
	if p.Failures.Count != 1 || len(p.Failures.First) != 1 || p.Failures.First[0].Key != denied.key ||
		!strings.Contains(p.Failures.First[0].Reason, "source") || !strings.Contains(p.Failures.First[0].Reason, "AccessDenied") {
		t.Fatalf("failures %s, want the one denied key with the source's AccessDenied", p.Failures)
	}
	if p.Differences.Count != 1 || p.Differences.First[0].Key != denied.key {
		t.Errorf("differences %s, want the denied key", p.Differences)
	}
	t.Logf("failures: %s", p.Failures)
	expectObjects(t, tgt, objs)

	if err := admin.PutBucketPolicy(ctx, src.bucket, ""); err != nil {
		t.Fatal(err)
	}
	if p := f.run(mover.ModeFinal, 2); !p.Verified || p.Counts.CopiedObjects != 1 {
		t.Fatalf("once readable: verified %v, copied %d (want the one key)", p.Verified, p.Counts.CopiedObjects)
	}
	expectObjects(t, tgt, append(objs, denied))
}

// TestNameTheTargetRefusesStopsBeforeVerified: Versity keeps objects as files, so it
// cannot hold "dir" and "dir/x" both (409 ObjectParentIsFile), which RGW can. The pass
// records the refused key as a failure, copies the rest and is not verified.
func TestNameTheTargetRefusesStopsBeforeVerified(t *testing.T) {
	objs := []object{{key: "dir", size: 10}, {key: "dir/x", size: 20}, {key: "other", size: 30}}
	src, tgt := newBucket(t, rgw, false), newBucket(t, versity, false)
	src.putAll(t, objs)
	f := newMove(t, src, tgt, mover.VersionsCurrent)
	f.spec.Limits.Concurrency = 1 // "dir" first: written after "dir/x", it would be the one refused
	p := f.run(mover.ModeFinal, 1)
	if p.Verified || p.Failures.Count != 1 || p.Failures.First[0].Key != "dir/x" || !strings.Contains(p.Failures.First[0].Reason, "target") {
		t.Fatalf("verified %v, failures %s; want the refused key dir/x, unverified", p.Verified, p.Failures)
	}
	t.Logf("failures: %s", p.Failures)
	expectObjects(t, tgt, []object{objs[0], objs[2]})
}
