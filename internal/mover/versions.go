package mover

import (
	"context"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// copyHistory makes one key's history on the target the source's (VersionsAll):
// the same sequence of versions and delete markers, oldest first, each version with
// its bytes, metadata and tags (and, in a move of object lock, its lock). S3 lets no
// one choose version IDs and only appends to a history, so the target keeps the
// longest run of its versions that matches the source's in order, permanently deletes
// the rest, and appends what the source has beyond that run, in order.
//
// A source's history only grows at its end, or loses versions anywhere (deleted for
// good, or expired): walking both oldest first and dropping each target version that
// does not match the next source one leaves exactly the matched ones, in order.
func (s *shard) copyHistory(ctx context.Context, key string, src, tgt []s3.ObjectEntry) error {
	var drop []s3.ObjectID
	j := 0
	for _, t := range tgt {
		if j < len(src) && s.sameEntry(key, src[j], t) {
			j++
			continue
		}
		drop = append(drop, s3.ObjectID{Key: key, VersionID: t.VersionID})
	}
	if len(drop) > 0 {
		if err := s.deleteOnTarget(ctx, drop); err != nil {
			return err
		}
	}
	for _, v := range src[j:] {
		if v.IsDeleteMarker {
			// A delete without a version ID is what puts a marker on a versioned
			// bucket.
			err := retryTransient(ctx, func() error { return s.stores.Target.DeleteObject(ctx, s.spec.Target.Bucket, key) })
			if err != nil {
				return onTarget(err)
			}
			s.update(func(cp *Checkpoint) { cp.Counts.CopiedObjects++; cp.Moved.Objects++ })
			continue
		}
		if err := s.copyObject(ctx, key, v); err != nil {
			return err
		}
	}
	return nil
}
