package mover

import (
	"context"
	"crypto/md5" //nolint:gosec // S3's part ETags are MD5s: the content check
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// Large objects are copied part by part, each part streamed from a ranged GET into an
// UploadPart and checked: the target's part ETag must be the MD5 the mover computed
// while streaming it. When the source tells how it was uploaded (a HEAD of part 1
// answers the part's length and the part count, as AWS, SeaweedFS and RGW do), the
// copy uses the same part sizes, and the target's ETag (the MD5 of the parts' MD5s) is
// the source's; otherwise the mover lays the parts out itself and records an
// equivalence (equivalence.go).
//
// The upload is in the checkpoint from the moment it starts, so a mover killed in the
// middle of a large object resumes it: the parts already on the target (ListParts)
// are checked by reading their ranges from the source again, and only the missing or
// wrong ones are sent.

// partsPerObject bounds the parts of one object in flight; the transfers semaphore
// bounds all of them together.
const partsPerObject = 4

// layout is how an object is cut into parts: every part partSize long but the last,
// or explicit sizes when the source's parts differ.
type layout struct {
	size, partSize int64
	sizes          []int64 // explicit sizes, nil when uniform
	fromSource     bool
}

func (l layout) count() int {
	if l.sizes != nil {
		return len(l.sizes)
	}
	return int((l.size + l.partSize - 1) / l.partSize)
}

// part returns part i's offset and length (i from 0).
func (l layout) part(i int) (int64, int64) {
	if l.sizes != nil {
		var off int64
		for _, n := range l.sizes[:i] {
			off += n
		}
		return off, l.sizes[i]
	}
	off := int64(i) * l.partSize
	return off, min(l.partSize, l.size-off)
}

// ownLayout is the mover's own layout of size bytes: parts of PartSize, larger when
// S3's 10,000 parts would not hold the object.
func (s *shard) ownLayout(size int64) layout {
	p := s.limits.PartSize
	if need := (size + maxParts - 1) / maxParts; need > p {
		p = (need + 1<<20 - 1) &^ (1<<20 - 1)
	}
	return layout{size: size, partSize: p}
}

// layoutOf finds the source's layout of a multipart object, or falls back to the
// mover's own.
func (s *shard) layoutOf(ctx context.Context, key string, e s3.ObjectEntry, req s3.ReadRequest) (layout, error) {
	n := partsOf(e.ETag)
	if n == 0 || e.Size == 0 {
		return s.ownLayout(e.Size), nil
	}
	head := func(part int) (s3.ObjectInfo, error) {
		r := req
		r.PartNumber = int32(part)
		return s.stores.Source.HeadObject(ctx, s.spec.Source.Bucket, key, r)
	}
	first, err := head(1)
	switch {
	case changedUnderUs(err):
		return layout{}, onSource(err)
	case err != nil && transient(err):
		return layout{}, onSource(err)
	case err != nil || int(first.PartsCount) != n || first.ContentLength <= 0:
		return s.ownLayout(e.Size), nil // the store does not tell its parts
	}
	p := first.ContentLength
	if int64(n-1)*p < e.Size && e.Size <= int64(n)*p {
		return layout{size: e.Size, partSize: p, fromSource: true}, nil
	}
	sizes := []int64{p}
	total := p
	for part := 2; part <= n; part++ {
		info, err := head(part)
		if err != nil {
			return layout{}, onSource(err)
		}
		sizes = append(sizes, info.ContentLength)
		total += info.ContentLength
	}
	if total != e.Size {
		return s.ownLayout(e.Size), nil
	}
	return layout{size: e.Size, partSize: p, sizes: sizes, fromSource: true}, nil
}

// copyParts copies one object part by part, resuming an upload a killed mover left.
func (s *shard) copyParts(ctx context.Context, key string, e s3.ObjectEntry, req s3.ReadRequest) (written, error) {
	var lay layout
	err := retryTransient(ctx, func() error {
		var err error
		lay, err = s.layoutOf(ctx, key, e, req)
		return err
	})
	if err != nil {
		return written{}, err
	}
	up, parts, lock, err := s.startUpload(ctx, key, e, req, lay)
	if err != nil {
		return written{}, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(partsPerObject)
	for i := range lay.count() {
		if parts[i].ETag != "" {
			continue
		}
		g.Go(func() error {
			return retryTransient(gctx, func() error {
				p, err := s.copyPart(gctx, key, up.UploadID, i, lay, req)
				parts[i] = p
				return err
			})
		})
	}
	if err := g.Wait(); err != nil {
		if se := (*s3.Error)(nil); errors.As(err, &se) && se.Code == "NoSuchUpload" {
			s.dropUpload(up.UploadID) // gone: the next attempt starts a new one
		}
		return written{}, err
	}
	var res s3.WriteResult
	err = retryTransient(ctx, func() error {
		var err error
		res, err = s.stores.Target.CompleteMultipartUpload(ctx, s.spec.Target.Bucket, key, up.UploadID, parts)
		return onTarget(err)
	})
	if err != nil {
		return written{}, err
	}
	s.dropUpload(up.UploadID)
	return written{res.VersionID, lock}, s.settleETag(key, e, e.ETag, res.ETag)
}

// copyPart streams part i (from 0) and checks the target's ETag of it.
func (s *shard) copyPart(ctx context.Context, key, uploadID string, i int, lay layout, req s3.ReadRequest) (s3.Part, error) {
	if err := s.transfers.Acquire(ctx, 1); err != nil {
		return s3.Part{}, err
	}
	defer s.transfers.Release(1)
	off, n := lay.part(i)
	req.Offset, req.Length = off, n
	info, body, err := s.stores.Source.OpenObject(ctx, s.spec.Source.Bucket, key, req, n)
	if err != nil {
		return s3.Part{}, onSource(err)
	}
	defer body.Close()
	if info.ContentLength != n {
		return s3.Part{}, &changedError{fmt.Sprintf("key %s answered %d bytes for a part of %d", quoteKey(key), info.ContentLength, n)}
	}
	h := md5.New() //nolint:gosec
	r := &countingReader{r: io.TeeReader(body, h)}
	etag, err := s.stores.Target.UploadPart(ctx, s.spec.Target.Bucket, key, uploadID, int32(i+1), r, n, "")
	s.wrote(r.n)
	if err != nil {
		return s3.Part{}, onTarget(err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); etag != sum {
		return s3.Part{}, fmt.Errorf("target stored part %d of key %s with ETag %s, the bytes sent have MD5 %s", i+1, quoteKey(key), etag, sum)
	}
	return s3.Part{Number: int32(i + 1), ETag: etag, Size: n}, nil
}

// startUpload resumes the checkpoint's upload of this object, keeping the parts the
// target has that the source's bytes confirm, or starts a new upload and records it
// before any part is sent. lock is what the upload's object is locked with, in a move
// of object lock: the source's lock of the version when the upload started (read
// again for one resumed, which was started with the lock of then; checkWritten
// lengthens it if it holds less).
func (s *shard) startUpload(ctx context.Context, key string, e s3.ObjectEntry, req s3.ReadRequest, lay layout) (Upload, []s3.Part, s3.ObjectLock, error) {
	parts := make([]s3.Part, lay.count())
	rec, ok := s.findUpload(key)
	if ok && rec.SourceETag == e.ETag && rec.SourceVersionID == e.VersionID && rec.Size == e.Size && rec.PartSize == lay.partSize {
		var have []s3.Part
		err := retryTransient(ctx, func() error {
			var err error
			have, err = s.stores.Target.ListParts(ctx, s.spec.Target.Bucket, key, rec.UploadID)
			return onTarget(err)
		})
		if err == nil {
			var lock s3.ObjectLock
			if s.spec.ObjectLock != nil {
				if lock, err = s.lockToWrite(ctx, key, e.VersionID); err != nil {
					return Upload{}, nil, lock, err
				}
			}
			kept := 0
			for _, p := range have {
				i := int(p.Number) - 1
				if i < 0 || i >= len(parts) {
					continue
				}
				if _, n := lay.part(i); n == p.Size && s.confirmPart(ctx, key, i, lay, req, p.ETag) {
					parts[i] = p
					kept++
				}
			}
			s.log.Info("resuming a multipart copy", "key", key, "partsKept", kept, "parts", len(parts))
			return rec, parts, lock, nil
		}
		if s3.KindOf(err) != s3.KindNotFound {
			return Upload{}, nil, s3.ObjectLock{}, err
		}
		s.dropUpload(rec.UploadID) // the upload is gone
	} else if ok {
		// The source object is another one now: its upload is of no use.
		_ = s.stores.Target.AbortMultipartUpload(ctx, s.spec.Target.Bucket, key, rec.UploadID)
		s.dropUpload(rec.UploadID)
	}
	head, err := s.stores.Source.HeadObject(ctx, s.spec.Source.Bucket, key, req)
	if err != nil {
		return Upload{}, nil, s3.ObjectLock{}, onSource(err)
	}
	meta, err := s.meta(ctx, key, head, true)
	if err != nil {
		return Upload{}, nil, meta.Lock, err
	}
	var id string
	err = retryTransient(ctx, func() error {
		var err error
		id, err = s.stores.Target.CreateMultipartUpload(ctx, s.spec.Target.Bucket, key, meta)
		return onTarget(err)
	})
	if err != nil {
		return Upload{}, nil, meta.Lock, err
	}
	up := Upload{Key: key, UploadID: id, SourceETag: e.ETag, SourceVersionID: e.VersionID, Size: e.Size, PartSize: lay.partSize}
	s.update(func(cp *Checkpoint) { cp.Uploads = append(cp.Uploads, up) })
	if err := s.save(ctx); err != nil {
		return Upload{}, nil, meta.Lock, err
	}
	return up, parts, meta.Lock, nil
}

// confirmPart reads part i's range from the source and says whether its MD5 is the
// ETag the target has for it: a part a killed mover sent, whose answer it never read.
func (s *shard) confirmPart(ctx context.Context, key string, i int, lay layout, req s3.ReadRequest, etag string) bool {
	if err := s.transfers.Acquire(ctx, 1); err != nil {
		return false
	}
	defer s.transfers.Release(1)
	off, n := lay.part(i)
	req.Offset, req.Length = off, n
	_, body, err := s.stores.Source.OpenObject(ctx, s.spec.Source.Bucket, key, req, n)
	if err != nil {
		return false
	}
	defer body.Close()
	h := md5.New() //nolint:gosec
	read, err := hashRange(h, body)
	return err == nil && read == n && hex.EncodeToString(h.Sum(nil)) == etag
}

func (s *shard) findUpload(key string) (Upload, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.cp.Uploads, func(u Upload) bool { return u.Key == key })
	if i < 0 {
		return Upload{}, false
	}
	return s.cp.Uploads[i], true
}

func (s *shard) dropUpload(id string) {
	s.update(func(cp *Checkpoint) {
		cp.Uploads = slices.DeleteFunc(cp.Uploads, func(u Upload) bool { return u.UploadID == id })
	})
}

// sweepUploads aborts the target's incomplete uploads in the shard's range that the
// checkpoint does not know: a mover killed between starting one and recording it
// left them. Before cutover only movers write the target bucket.
func (s *shard) sweepUploads(ctx context.Context) error {
	known := map[string]bool{}
	for _, u := range s.snapshot().Uploads {
		known[u.UploadID] = true
	}
	page := &s3.UploadPageToken{KeyMarker: s.r.After}
	for page != nil {
		var res s3.MultipartUploadPage
		err := retryTransient(ctx, func() error {
			var err error
			res, err = s.stores.Target.ListMultipartUploads(ctx, s.spec.Target.Bucket, page)
			return err
		})
		if s3.KindOf(err) == s3.KindNotImplemented {
			return nil
		}
		if err != nil {
			return onTarget(err)
		}
		for _, u := range res.Uploads {
			if s.r.Beyond(u.Key) {
				return nil
			}
			if !known[u.UploadID] && s.r.Contains(u.Key) {
				if err := s.stores.Target.AbortMultipartUpload(ctx, s.spec.Target.Bucket, u.Key, u.UploadID); err != nil {
					return onTarget(err)
				}
			}
		}
		page = res.Next
	}
	return nil
}

// abortStale aborts the uploads the checkpoint still holds after a copy pass went
// over every key: their objects changed or went before they were done.
func (s *shard) abortStale(ctx context.Context) {
	for _, u := range s.snapshot().Uploads {
		if err := s.stores.Target.AbortMultipartUpload(ctx, s.spec.Target.Bucket, u.Key, u.UploadID); err == nil {
			s.dropUpload(u.UploadID)
		}
	}
}
