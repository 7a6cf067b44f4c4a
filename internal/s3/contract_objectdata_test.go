package s3

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // S3's ETags are MD5s
	"encoding/base64"
	"encoding/hex"
	"io"
	"strings"
	"testing"
)

// objectDataContract pins what moving a bucket to another store relies on (the mover,
// internal/mover): the order of a key's versions and delete markers in a listing, the
// answers to reads by range and If-Match, the tag count a GET tells, a streamed
// write checked by Content-MD5, and multipart ETags and part sizes. Every store of
// the harness answers all of it alike.
func objectDataContract(ctx context.Context, t *testing.T, s *store) {
	b := s.bucket(t)
	must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
	must(t, "PutBucketVersioning", s.c.PutBucketVersioning(ctx, b, VersioningEnabled))
	meta := ObjectMeta{ContentType: "text/x-test", ContentLanguage: "fr", CacheControl: "no-cache",
		Expires: "Thu, 01 Jan 2032 00:00:00 GMT", Metadata: map[string]string{"owner": "team"}, Tags: map[string]string{"a": "b"}}
	write := func(key, body string, m ObjectMeta) WriteResult {
		t.Helper()
		sum := md5.Sum([]byte(body)) //nolint:gosec
		res, err := s.c.WriteObject(ctx, b, key, m, bytes.NewReader([]byte(body)), int64(len(body)), base64.StdEncoding.EncodeToString(sum[:]))
		must(t, "WriteObject "+key, err)
		return res
	}
	// One key's history within one second: two versions and a delete marker.
	write("k", "one", meta)
	two := write("k", "two", ObjectMeta{})
	must(t, "DeleteObject (marker)", s.c.DeleteObject(ctx, b, "k"))
	page, err := s.c.ListRange(ctx, b, RangeOptions{Versions: true}, nil)
	must(t, "ListRange versions", err)
	if len(page.Entries) != 3 || !page.Entries[0].IsDeleteMarker || !page.Entries[0].IsLatest || page.Entries[1].ETag != two.ETag || page.Entries[2].Size != 3 {
		t.Fatalf("versions of k, newest first: %+v; want a marker, two, one", page.Entries)
	}
	// A version written over the marker: Versity acknowledges it, lists it as a delete
	// marker and answers NoSuchKey, so the write is lost (expectations.putOverMarkerLost).
	write("k", "three", ObjectMeta{})
	cur, err := s.c.ListRange(ctx, b, RangeOptions{StartAfter: "a"}, nil)
	must(t, "ListRange current", err)
	lost := len(cur.Entries) == 0
	t.Logf("ANSWER %s | PUT over a delete marker | lost: %v", s.kind, lost)
	if lost != s.expect.putOverMarkerLost || (!lost && (cur.Entries[0].Key != "k" || cur.Entries[0].ETag != md5hex("three"))) {
		t.Errorf("current objects after a PUT over a marker: %+v, want it lost: %v", cur.Entries, s.expect.putOverMarkerLost)
	}

	// Reads: the first version by ID with its metadata and tag count, a range, and a
	// read the store refuses because the object is not the one listed.
	old := page.Entries[2]
	buf := make([]byte, 8)
	info, n, err := s.c.ReadObject(ctx, b, "k", ReadRequest{VersionID: old.VersionID}, buf)
	must(t, "ReadObject version", err)
	t.Logf("ANSWER %s | GET tag count | %d", s.kind, info.TagCount)
	if string(buf[:n]) != "one" || info.TagCount != 1 || info.ContentLanguage != "fr" || info.Expires != meta.Expires || info.Metadata["owner"] != "team" {
		t.Errorf("read of version one: %q, %+v", buf[:n], info)
	}
	tags, err := s.c.GetObjectTagging(ctx, b, "k", old.VersionID)
	must(t, "GetObjectTagging version", err)
	if tags["a"] != "b" {
		t.Errorf("tags of version one: %v", tags)
	}
	r := write("r", "two", ObjectMeta{})
	info, body, err := s.c.OpenObject(ctx, b, "r", ReadRequest{IfMatch: r.ETag, Offset: 1, Length: 2}, 2)
	must(t, "OpenObject range", err)
	got, _ := io.ReadAll(body)
	_ = body.Close()
	if string(got) != "wo" || info.Size != 3 {
		t.Errorf("range 1+2 of two: %q of %d bytes", got, info.Size)
	}
	_, _, err = s.c.ReadObject(ctx, b, "r", ReadRequest{IfMatch: md5hex("other")}, buf)
	answer(t, s, "GET If-Match another ETag", err)
	if !ChangedSince(err) {
		t.Errorf("GET with a stale If-Match: %v, want a 412", err)
	}

	// A streamed (unsigned) write is checked by Content-MD5: the wrong one is refused.
	streamed := strings.Repeat("x", 70000)
	_, err = s.c.WriteObject(ctx, b, "s", ObjectMeta{}, io.MultiReader(strings.NewReader(streamed)), int64(len(streamed)), contentMD5Of("not it"))
	wantKind(t, s, "streamed PutObject with the wrong Content-MD5", err, KindInvalid)
	res, err := s.c.WriteObject(ctx, b, "s", ObjectMeta{}, io.MultiReader(strings.NewReader(streamed)), int64(len(streamed)), contentMD5Of(streamed))
	must(t, "streamed PutObject", err)
	if res.ETag != md5hex(streamed) {
		t.Errorf("streamed object's ETag %s, want its MD5", res.ETag)
	}

	// Multipart: part ETags are MD5s, the object's the MD5 of theirs, and a HEAD by
	// part number tells the part's size and the part count.
	id, err := s.c.CreateMultipartUpload(ctx, b, "mp", meta)
	must(t, "CreateMultipartUpload", err)
	p1, p2 := strings.Repeat("a", 5<<20), "tail"
	for i, p := range []string{p1, p2} {
		etag, err := s.c.UploadPart(ctx, b, "mp", id, int32(i+1), io.MultiReader(strings.NewReader(p)), int64(len(p)), "")
		must(t, "UploadPart", err)
		if etag != md5hex(p) {
			t.Errorf("part %d ETag %s, want its MD5", i+1, etag)
		}
	}
	parts, err := s.c.ListParts(ctx, b, "mp", id)
	must(t, "ListParts", err)
	done, err := s.c.CompleteMultipartUpload(ctx, b, "mp", id, parts)
	must(t, "CompleteMultipartUpload", err)
	if want := compositeETag(p1, p2); done.ETag != want {
		t.Errorf("multipart ETag %s, want %s", done.ETag, want)
	}
	head, err := s.c.HeadObject(ctx, b, "mp", ReadRequest{PartNumber: 1})
	must(t, "HeadObject part 1", err)
	t.Logf("ANSWER %s | HEAD partNumber=1 | %d bytes of %d parts", s.kind, head.ContentLength, head.PartsCount)
	if head.ContentLength != int64(len(p1)) || head.PartsCount != 2 {
		t.Errorf("HEAD of part 1: %d bytes, %d parts", head.ContentLength, head.PartsCount)
	}
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s)) //nolint:gosec
	return hex.EncodeToString(sum[:])
}

func contentMD5Of(s string) string {
	sum := md5.Sum([]byte(s)) //nolint:gosec
	return base64.StdEncoding.EncodeToString(sum[:])
}

// compositeETag is a multipart object's ETag: the MD5 of its parts' MD5s, and their count.
func compositeETag(parts ...string) string {
	h := md5.New() //nolint:gosec
	for _, p := range parts {
		sum := md5.Sum([]byte(p)) //nolint:gosec
		h.Write(sum[:])
	}
	return hex.EncodeToString(h.Sum(nil)) + "-" + string(rune('0'+len(parts)))
}
