package mover

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // S3's ETags and Content-MD5 are MD5: the content check, not security
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// How one object is copied, by size:
//
//   - up to SmallObject: read whole into a pooled buffer, written with a signed body and
//     Content-MD5 (the store refuses bytes whose MD5 differs from what was read);
//   - a single-part object up to StreamLimit: streamed from the GET into the PUT through
//     a 32 KiB buffer, with Content-MD5 set to the source's ETag (the MD5 of its bytes),
//     so the target refuses anything but the source's bytes and keeps the same ETag;
//   - anything larger, and every multipart object: copied part by part (parts.go).
//
// Metadata (Content-Type, -Encoding, -Language, -Disposition, Cache-Control, Expires,
// user metadata) travels with the write, tags too (the x-amz-tagging header), and in a
// bucket with object lock the version's retention and legal hold (lock.go), so an
// object never exists on the target without them.

// sameHistory says whether a key is equal on both sides: as many entries, each equal.
func (s *shard) sameHistory(key string, src, tgt []s3.ObjectEntry) bool {
	if len(src) != len(tgt) || len(src) == 0 {
		return false
	}
	for i := range src {
		if !s.sameEntry(key, src[i], tgt[i]) {
			return false
		}
	}
	return true
}

// sameEntry compares one object (or version, or delete marker) by size and content:
// the ETags are equal (both the MD5 of the bytes, or of the same parts' MD5s), or an
// equivalence recorded after a checked copy says the target's ETag holds the source's
// object.
func (s *shard) sameEntry(key string, a, b s3.ObjectEntry) bool {
	if a.IsDeleteMarker || b.IsDeleteMarker {
		return a.IsDeleteMarker == b.IsDeleteMarker
	}
	if a.Size != b.Size {
		return false
	}
	if a.ETag != "" && a.ETag == b.ETag {
		return true
	}
	return s.eq.equal(key, a.ETag, a.Size, b.ETag)
}

// copyObject copies the object (or version) the listing entry e names.
func (s *shard) copyObject(ctx context.Context, key string, e s3.ObjectEntry) error {
	req := s3.ReadRequest{VersionID: e.VersionID}
	if e.VersionID == "" {
		req.IfMatch = e.ETag // copy what was listed, or nothing
	}
	var w written
	var err error
	switch {
	case e.Size <= s.limits.SmallObject:
		err = retryTransient(ctx, func() (err error) { w, err = s.copySmall(ctx, key, e, req); return err })
	case partsOf(e.ETag) == 0 && e.Size <= s.limits.StreamLimit:
		err = retryTransient(ctx, func() (err error) { w, err = s.copyStreamed(ctx, key, e, req); return err })
	default:
		w, err = s.copyParts(ctx, key, e, req)
	}
	if err == nil && s.spec.ObjectLock != nil {
		err = s.checkWritten(ctx, key, w)
	}
	if err != nil {
		return err
	}
	s.update(func(cp *Checkpoint) {
		cp.Counts.CopiedObjects++
		cp.Counts.CopiedBytes += e.Size
		cp.Moved.Objects++
		cp.Moved.Bytes += e.Size
	})
	return nil
}

// copySmall copies an object read whole into memory.
func (s *shard) copySmall(ctx context.Context, key string, e s3.ObjectEntry, req s3.ReadRequest) (written, error) {
	bp := s.buffers.Get().(*[]byte)
	defer s.buffers.Put(bp)
	if err := s.transfers.Acquire(ctx, 1); err != nil {
		return written{}, err
	}
	defer s.transfers.Release(1)
	info, n, err := s.stores.Source.ReadObject(ctx, s.spec.Source.Bucket, key, req, (*bp)[:e.Size])
	if errors.Is(err, s3.ErrShortBody) || (err == nil && (int64(n) != e.Size || info.Size != e.Size)) {
		return written{}, &changedError{fmt.Sprintf("key %s is not of the listed size any more", quoteKey(key))}
	}
	if err != nil {
		return written{}, onSource(err)
	}
	body := (*bp)[:n]
	sum := md5.Sum(body) //nolint:gosec
	meta, err := s.meta(ctx, key, info, false)
	if err != nil {
		return written{}, err
	}
	res, err := s.stores.Target.WriteObject(ctx, s.spec.Target.Bucket, key, meta, bytes.NewReader(body), int64(n), base64.StdEncoding.EncodeToString(sum[:]))
	s.wrote(int64(n))
	if err != nil {
		return written{}, onTarget(err)
	}
	return written{res.VersionID, meta.Lock}, s.settleETag(key, e, info.ETag, res.ETag)
}

// copyStreamed copies a single-part object by streaming its GET into its PUT.
func (s *shard) copyStreamed(ctx context.Context, key string, e s3.ObjectEntry, req s3.ReadRequest) (written, error) {
	if err := s.transfers.Acquire(ctx, 1); err != nil {
		return written{}, err
	}
	defer s.transfers.Release(1)
	info, body, err := s.stores.Source.OpenObject(ctx, s.spec.Source.Bucket, key, req, e.Size)
	if err != nil {
		return written{}, onSource(err)
	}
	defer body.Close()
	if info.Size != e.Size || info.ContentLength != e.Size {
		return written{}, &changedError{fmt.Sprintf("key %s is not of the listed size any more", quoteKey(key))}
	}
	meta, err := s.meta(ctx, key, info, false)
	if err != nil {
		return written{}, err
	}
	h := md5.New() //nolint:gosec
	r := &countingReader{r: io.TeeReader(body, h)}
	checked := contentMD5(info.ETag)
	res, err := s.stores.Target.WriteObject(ctx, s.spec.Target.Bucket, key, meta, r, e.Size, checked)
	s.wrote(r.n)
	w := written{res.VersionID, meta.Lock}
	if err == nil && checked == "" {
		if sum := hex.EncodeToString(h.Sum(nil)); res.ETag != sum {
			return w, fmt.Errorf("target stored key %s with ETag %s, the bytes sent have MD5 %s", quoteKey(key), res.ETag, sum)
		}
	}
	var se *s3.Error
	if errors.As(err, &se) && se.Code == "BadDigest" && info.ETag == e.ETag && r.n == e.Size && hex.EncodeToString(h.Sum(nil)) != info.ETag {
		// The bytes are the listed object's but its ETag is no MD5 (an AWS
		// SSE-KMS object): copy it again without the header, checked after.
		return s.copyStreamedUnchecked(ctx, key, e, req, meta)
	}
	if err != nil {
		return w, onTarget(err)
	}
	return w, s.settleETag(key, e, info.ETag, res.ETag)
}

// copyStreamedUnchecked streams an object whose ETag is not the MD5 of its bytes: the
// target's ETag is compared with the MD5 computed while streaming instead.
func (s *shard) copyStreamedUnchecked(ctx context.Context, key string, e s3.ObjectEntry, req s3.ReadRequest, meta s3.ObjectMeta) (written, error) {
	info, body, err := s.stores.Source.OpenObject(ctx, s.spec.Source.Bucket, key, req, e.Size)
	if err != nil {
		return written{}, onSource(err)
	}
	defer body.Close()
	h := md5.New() //nolint:gosec
	r := &countingReader{r: io.TeeReader(body, h)}
	res, err := s.stores.Target.WriteObject(ctx, s.spec.Target.Bucket, key, meta, r, e.Size, "")
	s.wrote(r.n)
	w := written{res.VersionID, meta.Lock}
	if err != nil {
		return w, onTarget(err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); res.ETag != sum {
		return w, fmt.Errorf("target stored key %s with ETag %s, the bytes sent have MD5 %s", quoteKey(key), res.ETag, sum)
	}
	return w, s.settleETag(key, e, info.ETag, res.ETag)
}

// settleETag decides, after a write the target checked against the bytes read,
// whether the listing will find the object equal: the same ETag on both sides, or an
// equivalence recorded now. readETag is the ETag the source answered the read with:
// another than the listed one means the object changed between listing and read
// (a store that ignores If-Match), and the next pass compares again.
func (s *shard) settleETag(key string, e s3.ObjectEntry, readETag, written string) error {
	switch {
	case written == e.ETag:
		return nil
	case readETag != e.ETag:
		return &changedError{fmt.Sprintf("key %s changed while it was copied", quoteKey(key))}
	}
	if err := s.eq.add(key, e.ETag, e.Size, written); err != nil {
		return err
	}
	s.update(func(*Checkpoint) {}) // the records are part of the checkpoint
	return nil
}

// meta is what the write of an object must carry: what the read answered (its lock
// only in a move of object lock, refused where the target's rules do not allow it),
// and the tags unless the read said there are none. A GET tells how many tags an object has
// (x-amz-tagging-count) but leaves the header out for none, so its absence means "no
// tags" only from a store known to send it: one the spec says does
// (Bucket.SendsTagCount), or one that sent it for another object of this pass.
// Otherwise, and after a HEAD (which never tells), the tags are asked for.
func (s *shard) meta(ctx context.Context, key string, info s3.ObjectInfo, fromHead bool) (s3.ObjectMeta, error) {
	meta := info.ObjectMeta
	meta.Lock = s3.ObjectLock{}
	if s.spec.ObjectLock != nil {
		var err error
		if meta.Lock, err = s.lockToWrite(ctx, key, info.VersionID); err != nil {
			return meta, err
		}
	}
	if info.TagCount > 0 {
		s.tagCounts.Store(true)
	}
	if !fromHead && (info.TagCount == 0 || (info.TagCount < 0 && s.tagCounts.Load())) {
		return meta, nil
	}
	tags, err := s.stores.Source.GetObjectTagging(ctx, s.spec.Source.Bucket, key, info.VersionID)
	if err != nil {
		return meta, onSource(err)
	}
	meta.Tags = tags
	return meta, nil
}

// wrote counts bytes sent to the target.
func (s *shard) wrote(n int64) {
	s.update(func(cp *Checkpoint) { cp.Moved.WrittenBytes += n })
}

// partsOf is the part count of a multipart ETag ("<md5 of md5s>-<parts>"), 0 for any
// other ETag.
func partsOf(etag string) int {
	i := strings.LastIndexByte(etag, '-')
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(etag[i+1:])
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// contentMD5 is the Content-MD5 header (base64) of an ETag that has the form of an
// MD5 (32 hex digits), "" for any other.
func contentMD5(etag string) string {
	if len(etag) != 32 {
		return ""
	}
	b, err := hex.DecodeString(etag)
	if err != nil {
		return ""
	}
	return base64.StdEncoding.EncodeToString(b)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// hashRange reads n bytes of body into h.
func hashRange(h hash.Hash, body io.Reader) (int64, error) {
	return io.Copy(h, body)
}
