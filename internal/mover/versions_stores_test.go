package mover_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// version is one entry of a key's history as a test reads it back, oldest first.
type version struct {
	id     string
	marker bool
	size   int64
	sha256 string
}

// history reads every key's versions and delete markers, oldest first, with each
// version's content hash. The order is the store's listing order (the XML's, which
// internal/s3 keeps and its unit test pins): versions written in the same second
// cannot be ordered by their times.
func history(t *testing.T, s side) map[string][]version {
	t.Helper()
	ctx := context.Background()
	c := storeClient(t, s.srv)
	out := map[string][]version{}
	var page *s3.PageToken
	for {
		res, err := c.ListRange(ctx, s.bucket, s3.RangeOptions{Versions: true}, page)
		if err != nil {
			t.Fatalf("listing versions on %s: %v", s.srv.Kind, err)
		}
		for _, e := range res.Entries {
			v := version{id: e.VersionID, marker: e.IsDeleteMarker, size: e.Size}
			if !v.marker {
				st, err := s.read(ctx, e.Key, e.VersionID)
				if err != nil {
					t.Fatalf("reading %s version %s on %s: %v", e.Key, e.VersionID, s.srv.Kind, err)
				}
				v.sha256 = st.sha256
			}
			out[e.Key] = append([]version{v}, out[e.Key]...) // listed newest first
		}
		if page = res.Next; page == nil {
			return out
		}
	}
}

// TestMoveEveryVersion moves a versioned RGW bucket with overwritten keys and delete
// markers (in the middle of a history and at its end) to SeaweedFS, then changes the
// source (a new version, a new marker, an old version deleted for good) and moves
// again: the target's every key has the source's history in order, each version with
// the source's bytes.
func TestMoveEveryVersion(t *testing.T) {
	ctx := context.Background()
	src, tgt := newBucket(t, rgw, true), newBucket(t, seaweed, true)
	put := func(key string, gen int, size int64) {
		t.Helper()
		if err := src.put(ctx, object{key: key, gen: gen, size: size}); err != nil {
			t.Fatal(err)
		}
	}
	del := func(key string) {
		t.Helper()
		if _, err := src.c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(src.bucket), Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		k := fmt.Sprintf("k%02d", i)
		put(k, 1, int64(100*i))
		if i%2 == 0 {
			put(k, 2, int64(100*i+1))
		}
		if i%3 == 0 {
			del(k) // a marker in the middle (if written over later) or at the end
		}
		if i%4 == 0 {
			put(k, 3, 7)
		}
	}
	put("large", 1, 9<<20) // a streamed version
	put("large", 2, 3)

	f := newMove(t, src, tgt, mover.VersionsAll)
	p := f.run(mover.ModeCopy, 1)
	if p.Failures.Count != 0 {
		t.Fatalf("copy pass failures: %s", p.Failures)
	}
	expectHistories(t, src, tgt)

	// The source changes between passes: a key gets a new version, another a new
	// marker, and an old version of a third is deleted for good.
	put("k01", 9, 11)
	del("k05")
	old := history(t, src)["k02"][0]
	if _, err := src.c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(src.bucket), Key: aws.String("k02"), VersionId: aws.String(old.id)}); err != nil {
		t.Fatal(err)
	}
	p = f.run(mover.ModeFinal, 2)
	if !p.Verified {
		t.Fatalf("final pass not verified: differences %s, failures %s", p.Differences, p.Failures)
	}
	if p.Counts.CopiedObjects != 2 || p.Counts.Deleted != 1 {
		t.Errorf("second pass copied %d (want the new version and marker: 2) and deleted %d (want 1)", p.Counts.CopiedObjects, p.Counts.Deleted)
	}
	expectHistories(t, src, tgt)

	// Current versions only, from the same versioned source: keys whose history ends
	// with a marker are not copied.
	cur := newBucket(t, seaweed, false)
	g := newMove(t, src, cur, mover.VersionsCurrent)
	if p := g.run(mover.ModeFinal, 1); !p.Verified {
		t.Fatalf("current versions: not verified: %s", p.Differences)
	}
	srcKeys, _ := src.keys(ctx)
	curKeys, _ := cur.keys(ctx)
	if fmt.Sprint(srcKeys) != fmt.Sprint(curKeys) {
		t.Errorf("current versions: target keys %v, source's %v", curKeys, srcKeys)
	}
}

// expectHistories compares every key's history on both sides, oldest first: markers
// where markers are, versions of the same bytes.
func expectHistories(t *testing.T, src, tgt side) {
	t.Helper()
	want, got := history(t, src), history(t, tgt)
	if len(want) != len(got) {
		t.Errorf("%d keys with history on the target, want %d", len(got), len(want))
	}
	for k, ws := range want {
		gs := got[k]
		if len(gs) != len(ws) {
			t.Errorf("key %s: %d entries on the target, want %d", k, len(gs), len(ws))
			continue
		}
		for i := range ws {
			if ws[i].marker != gs[i].marker || ws[i].size != gs[i].size || ws[i].sha256 != gs[i].sha256 {
				t.Errorf("key %s entry %d: target %+v, source %+v", k, i, gs[i], ws[i])
			}
		}
	}
}
