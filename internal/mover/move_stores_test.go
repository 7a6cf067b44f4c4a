package mover_test

import (
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestMoveMixedObjects moves 2,000 objects of mixed sizes (0 B to 64 MiB, the large
// ones uploaded in parts) with metadata and tags from SeaweedFS to Ceph RGW in two
// shards, and compares every object's bytes (by hash), metadata and tags on the
// target with what was written. A second Final pass over the unchanged source copies
// nothing.
func TestMoveMixedObjects(t *testing.T) {
	large := []object{
		{key: "large/64mib.bin", size: 64 << 20, partSize: 8 << 20, tags: map[string]string{"size": "large"},
			meta: objectMeta{contentType: "video/mp4", user: map[string]string{"origin": "camera"}}},
		{key: "large/20mib-uneven.bin", size: 20<<20 + 12345, partSize: 5 << 20},
		{key: "large/12mib-single.bin", size: 12 << 20}, // one part: streamed
	}
	objs := mixedObjects("mixed", 2000, large)
	src, tgt := newBucket(t, seaweed, false), newBucket(t, rgw, false)
	begin := time.Now()
	src.putAll(t, objs)
	t.Logf("wrote %d objects (%d MiB) to %s in %s", len(objs), totalSize(objs)>>20, src.srv.Kind, time.Since(begin).Round(time.Millisecond))

	f := newMove(t, src, tgt, mover.VersionsCurrent)
	plan := f.plan(1, 2)
	if plan.Objects != int64(len(objs)) || plan.Bytes != totalSize(objs) || len(plan.Boundaries) != 1 {
		t.Fatalf("plan %+v, want %d objects of %d bytes in 2 shards", plan, len(objs), totalSize(objs))
	}
	begin = time.Now()
	p := f.run(mover.ModeFinal, 2)
	t.Logf("moved in %s: %+v, written %d bytes", time.Since(begin).Round(time.Millisecond), p.Counts, p.Moved.WrittenBytes)
	if !p.Verified || p.Failures.Count != 0 || p.Counts.CopiedObjects != int64(len(objs)) {
		t.Fatalf("final pass: verified %v, failures %s, copied %d of %d", p.Verified, p.Failures, p.Counts.CopiedObjects, len(objs))
	}
	expectObjects(t, tgt, objs)

	again := f.run(mover.ModeFinal, 3)
	if !again.Verified || again.Counts.Changes() != 0 || again.Counts.UnchangedObjects != int64(len(objs)) {
		t.Errorf("a pass over an unchanged source: %+v, verified %v; want nothing copied", again.Counts, again.Verified)
	}
}

// TestMovePairs moves a smaller mixed bucket between the other pairs of stores the
// issue names: RGW to SeaweedFS and Versity to SeaweedFS, each with a multipart object,
// a streamed one, metadata and tags.
func TestMovePairs(t *testing.T) {
	for _, pair := range []struct {
		name     string
		src, tgt func() *testenv.S3Server
	}{
		{"rgw-to-seaweedfs", func() *testenv.S3Server { return rgw }, func() *testenv.S3Server { return seaweed }},
		{"versity-to-seaweedfs", func() *testenv.S3Server { return versity }, func() *testenv.S3Server { return seaweed }},
	} {
		t.Run(pair.name, func(t *testing.T) {
			large := []object{
				{key: "big/18mib.bin", size: 18 << 20, partSize: 6 << 20, tags: map[string]string{"k": "v"},
					meta: objectMeta{contentType: "application/octet-stream", cacheControl: "no-cache", user: map[string]string{"a": "b"}}},
				{key: "big/3mib-single.bin", size: 3 << 20, meta: objectMeta{contentLanguage: "de"}},
			}
			objs := mixedObjects("pair", 120, large)
			src, tgt := newBucket(t, pair.src(), false), newBucket(t, pair.tgt(), false)
			src.putAll(t, objs)
			f := newMove(t, src, tgt, mover.VersionsCurrent)
			p := f.run(mover.ModeFinal, 1)
			if !p.Verified || p.Failures.Count != 0 {
				t.Fatalf("final pass: verified %v, failures %s, differences %s", p.Verified, p.Failures, p.Differences)
			}
			expectObjects(t, tgt, objs)
		})
	}
}
