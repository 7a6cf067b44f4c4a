package mover_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// object is one object a test writes on a source and expects on the target.
type object struct {
	key  string
	size int64
	// gen tells the content's generation: an overwrite writes gen+1.
	gen int
	// partSize > 0 uploads the object in parts of that size.
	partSize int64
	meta     objectMeta
	tags     map[string]string
}

// objectMeta is what S3 keeps with an object's bytes.
type objectMeta struct {
	contentType, contentEncoding, contentLanguage, contentDisposition, cacheControl, expires string
	user                                                                                     map[string]string
}

// content is the object's bytes: a window onto a random block that starts where the
// key and generation say, so nothing needs to hold them and making them costs a copy
// (the race detector slows a generator's every byte). The block's length is no
// divisor of any part size, so parts in the wrong order make other bytes.
func content(key string, gen int, size int64) io.Reader {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d", key, gen)))
	off := binary.BigEndian.Uint64(sum[:8]) % uint64(len(contentBlock))
	return io.LimitReader(&blockReader{off: int(off)}, size)
}

// contentBlock is 1 MiB and 7 bytes of random data, made once.
var contentBlock = func() []byte {
	b := make([]byte, 1<<20+7)
	_, _ = rand.Read(b)
	return b
}()

// blockReader reads contentBlock round and round from off.
type blockReader struct{ off int }

func (r *blockReader) Read(p []byte) (int, error) {
	n := copy(p, contentBlock[r.off:])
	r.off = (r.off + n) % len(contentBlock)
	return n, nil
}

// contentHash is the SHA-256 of content.
func contentHash(key string, gen int, size int64) string {
	h := sha256.New()
	_, _ = io.Copy(h, content(key, gen, size))
	return hex.EncodeToString(h.Sum(nil))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// side is one bucket of a test on one server.
type side struct {
	srv    *testenv.S3Server
	bucket string
	c      *awss3.Client
}

// newBucket creates a bucket (versioned if asked) that is emptied of every version
// and upload and deleted when the test ends.
func newBucket(t *testing.T, srv *testenv.S3Server, versioned bool) side {
	t.Helper()
	s := side{srv: srv, bucket: "mv-" + randomHex(8), c: srv.Client()}
	ctx := context.Background()
	if _, err := s.c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(s.bucket)}); err != nil {
		t.Fatalf("create %s on %s: %v", s.bucket, srv.Kind, err)
	}
	if versioned {
		_, err := s.c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: aws.String(s.bucket),
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})
		if err != nil {
			t.Fatalf("versioning on %s: %v", srv.Kind, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := s.destroy(ctx); err != nil {
			t.Errorf("cleanup of %s on %s: %v", s.bucket, srv.Kind, err)
		}
	})
	return s
}

// destroy deletes every version, marker and upload, then the bucket.
func (s side) destroy(ctx context.Context) error {
	for range 1000 {
		out, err := s.c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String(s.bucket)})
		if err != nil {
			return err
		}
		var ids []types.ObjectIdentifier
		for _, v := range out.Versions {
			ids = append(ids, types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
		}
		for _, m := range out.DeleteMarkers {
			ids = append(ids, types.ObjectIdentifier{Key: m.Key, VersionId: m.VersionId})
		}
		if len(ids) == 0 {
			break
		}
		// A page at a time: one request per version takes minutes for a bucket of
		// thousands on a loaded machine.
		res, err := s.c.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: aws.String(s.bucket),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		if err != nil {
			return err
		}
		if len(res.Errors) > 0 {
			e := res.Errors[0]
			return fmt.Errorf("deleting %d versions: %s %s: %s", len(res.Errors), aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
		}
	}
	ups, err := s.c.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String(s.bucket)})
	if err == nil {
		for _, u := range ups.Uploads {
			_, _ = s.c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: aws.String(s.bucket), Key: u.Key, UploadId: u.UploadId})
		}
	}
	_, err = s.c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String(s.bucket)})
	return err
}

// put writes o (in parts when o.partSize is set) with its metadata and tags.
func (s side) put(ctx context.Context, o object) error {
	m := o.meta
	var expires *time.Time
	if m.expires != "" {
		e, err := http.ParseTime(m.expires)
		if err != nil {
			return err
		}
		expires = &e
	}
	var tagging *string
	if len(o.tags) > 0 {
		v := url.Values{}
		for k, val := range o.tags {
			v.Set(k, val)
		}
		tagging = aws.String(v.Encode())
	}
	opt := func(p *string) *string {
		if p == nil || *p == "" {
			return nil
		}
		return p
	}
	if o.partSize == 0 {
		body, err := io.ReadAll(content(o.key, o.gen, o.size))
		if err != nil {
			return err
		}
		_, err = s.c.PutObject(ctx, &awss3.PutObjectInput{
			Bucket: aws.String(s.bucket), Key: aws.String(o.key), Body: bytes.NewReader(body),
			ContentType: opt(&m.contentType), ContentEncoding: opt(&m.contentEncoding), ContentLanguage: opt(&m.contentLanguage),
			ContentDisposition: opt(&m.contentDisposition), CacheControl: opt(&m.cacheControl), Expires: expires,
			Metadata: m.user, Tagging: tagging,
		})
		return err
	}
	up, err := s.c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: aws.String(o.key),
		ContentType: opt(&m.contentType), ContentEncoding: opt(&m.contentEncoding), ContentLanguage: opt(&m.contentLanguage),
		ContentDisposition: opt(&m.contentDisposition), CacheControl: opt(&m.cacheControl), Expires: expires,
		Metadata: m.user, Tagging: tagging,
	})
	if err != nil {
		return err
	}
	r := content(o.key, o.gen, o.size)
	var parts []types.CompletedPart
	for n := int32(1); ; n++ {
		buf := make([]byte, o.partSize)
		k, err := io.ReadFull(r, buf)
		if k == 0 {
			break
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return err
		}
		out, err := s.c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String(s.bucket), Key: aws.String(o.key),
			UploadId: up.UploadId, PartNumber: aws.Int32(n), Body: bytes.NewReader(buf[:k])})
		if err != nil {
			return err
		}
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag})
	}
	_, err = s.c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String(o.key),
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	return err
}

// putAll writes objs with a few writers at once.
func (s side) putAll(t *testing.T, objs []object) {
	t.Helper()
	ctx := context.Background()
	work := make(chan object)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range 8 {
		wg.Go(func() {
			for o := range work {
				if err := s.put(ctx, o); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("put %s: %w", o.key, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, o := range objs {
		work <- o
	}
	close(work)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("writing the source objects on %s: %v", s.srv.Kind, err)
	}
}

// objectState is what a target holds for one key, read back for comparison.
type objectState struct {
	sha256 string
	size   int64
	meta   objectMeta
	tags   map[string]string
}

// read reads one object (or version) back: its bytes' hash, metadata and tags.
func (s side) read(ctx context.Context, key, versionID string) (objectState, error) {
	out, err := s.c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key), VersionId: nonEmpty(versionID)})
	if err != nil {
		return objectState{}, err
	}
	defer out.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, out.Body)
	if err != nil {
		return objectState{}, err
	}
	st := objectState{sha256: hex.EncodeToString(h.Sum(nil)), size: n, meta: objectMeta{
		contentType: aws.ToString(out.ContentType), contentEncoding: aws.ToString(out.ContentEncoding),
		contentLanguage: aws.ToString(out.ContentLanguage), contentDisposition: aws.ToString(out.ContentDisposition),
		cacheControl: aws.ToString(out.CacheControl), expires: aws.ToString(out.ExpiresString), user: out.Metadata,
	}}
	st.tags = map[string]string{}
	// Every store of the harness tells a tagged object's tag count on GET (internal/s3's
	// contract case), so an answer without it is an object without tags.
	if aws.ToInt32(out.TagCount) == 0 {
		return st, nil
	}
	tags, err := s.c.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: aws.String(s.bucket), Key: aws.String(key), VersionId: nonEmpty(versionID)})
	if err != nil {
		return objectState{}, err
	}
	for _, tg := range tags.TagSet {
		st.tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	return st, nil
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}

// keys lists the bucket's current keys.
func (s side) keys(ctx context.Context) ([]string, error) {
	var keys []string
	var token *string
	for {
		out, err := s.c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String(s.bucket), ContinuationToken: token})
		if err != nil {
			return nil, err
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		if !aws.ToBool(out.IsTruncated) {
			return keys, nil
		}
		token = out.NextContinuationToken
	}
}

// expectObjects checks that the target holds exactly objs: every object's bytes (by
// SHA-256), metadata and tags, and no other key. Source content is recomputed, never
// read from the source, so a copy of a wrong source read would show.
func expectObjects(t *testing.T, tgt side, objs []object) {
	t.Helper()
	ctx := context.Background()
	keys, err := tgt.keys(ctx)
	if err != nil {
		t.Fatalf("listing the target: %v", err)
	}
	want := map[string]object{}
	for _, o := range objs {
		want[o.key] = o
	}
	var extra []string
	for _, k := range keys {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 || len(keys) != len(objs) {
		t.Errorf("target lists %d keys, want %d; keys not on the source: %q", len(keys), len(objs), first(extra, 5))
	}
	work := make(chan object)
	var mu sync.Mutex
	var bad []string
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for o := range work {
				if msg := checkObject(ctx, tgt, o); msg != "" {
					mu.Lock()
					bad = append(bad, msg)
					mu.Unlock()
				}
			}
		})
	}
	for _, o := range objs {
		work <- o
	}
	close(work)
	wg.Wait()
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%d of %d objects differ on the target (%s), first: %s", len(bad), len(objs), tgt.srv.Kind, strings.Join(first(bad, 5), "; "))
	}
}

// checkObject compares one target object with what was written; "" when equal.
func checkObject(ctx context.Context, tgt side, o object) string {
	st, err := tgt.read(ctx, o.key, "")
	if err != nil {
		return fmt.Sprintf("%s: %v", o.key, err)
	}
	if st.size != o.size || st.sha256 != contentHash(o.key, o.gen, o.size) {
		return fmt.Sprintf("%s: %d bytes with another content, want %d", o.key, st.size, o.size)
	}
	if msg := compareMeta(o.meta, st.meta); msg != "" {
		return o.key + ": " + msg
	}
	if fmt.Sprint(sortedMap(o.tags)) != fmt.Sprint(sortedMap(st.tags)) {
		return fmt.Sprintf("%s: tags %v, want %v", o.key, st.tags, o.tags)
	}
	return ""
}

func compareMeta(want, got objectMeta) string {
	pairs := [][3]string{
		{"Content-Type", want.contentType, got.contentType}, {"Content-Encoding", want.contentEncoding, got.contentEncoding},
		{"Content-Language", want.contentLanguage, got.contentLanguage}, {"Content-Disposition", want.contentDisposition, got.contentDisposition},
		{"Cache-Control", want.cacheControl, got.cacheControl}, {"Expires", want.expires, got.expires},
	}
	for _, p := range pairs {
		if p[1] != "" && p[1] != p[2] {
			return fmt.Sprintf("%s %q, want %q", p[0], p[2], p[1])
		}
	}
	if fmt.Sprint(sortedMap(want.user)) != fmt.Sprint(sortedMap(got.user)) {
		return fmt.Sprintf("user metadata %v, want %v", got.user, want.user)
	}
	return ""
}

func sortedMap(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func first[T any](s []T, n int) []T { return s[:min(n, len(s))] }

// mixedObjects is n objects of mixed sizes from 0 B up: mostly small, some streamed
// (above the mover's 1 MiB in-memory limit), and the given large ones uploaded in
// parts. Every fifth carries every representation header and user metadata, every
// seventh tags.
func mixedObjects(prefix string, n int, large []object) []object {
	rng := mrand.New(mrand.NewPCG(uint64(n), 42))
	objs := append([]object(nil), large...)
	for i := len(large); i < n; i++ {
		o := object{key: fmt.Sprintf("%s/%03d/obj-%05d.bin", prefix, i%37, i)}
		switch {
		case i%200 == 0:
			o.size = 0
		case i%100 == 1:
			o.size = 1<<20 + rng.Int64N(2<<20) // streamed
		default:
			o.size = rng.Int64N(64 << 10)
		}
		if i%5 == 0 {
			o.meta = objectMeta{contentType: "application/x-test", contentEncoding: "identity", contentLanguage: "fr-CH",
				contentDisposition: `attachment; filename="f` + fmt.Sprint(i) + `.bin"`, cacheControl: "max-age=60",
				expires: time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC).Format(http.TimeFormat),
				user:    map[string]string{"owner": "team-" + fmt.Sprint(i%3), "n": fmt.Sprint(i)}}
		}
		if i%7 == 0 {
			o.tags = map[string]string{"class": []string{"a", "b"}[i%2], "idx": fmt.Sprint(i)}
		}
		objs = append(objs, o)
	}
	return objs
}

// totalSize is the objects' bytes.
func totalSize(objs []object) int64 {
	var n int64
	for _, o := range objs {
		n += o.size
	}
	return n
}
