package mover

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// copyHistory makes one key's history on the target the source's (VersionsAll):
// the same sequence of versions and delete markers, oldest first, each version with
// its bytes, metadata and tags (and, in a move of object lock, its lock). S3 lets no
// one choose version IDs and only appends to a history, so the target keeps the
// longest run of its versions that matches the source's in order, permanently deletes
// the rest, and appends what the source has beyond that run, in order. A target that
// refuses a version right after a delete marker, or keeps it as one, cannot hold the
// key's history (historyRefused): the key fails by name.
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
	for k := j; k < len(src); k++ {
		v := src[k]
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
			if k > 0 && src[k-1].IsDeleteMarker && methodNotAllowed(err) {
				return onTarget(&historyRefused{key: key})
			}
			return err
		}
	}
	return nil
}

// historyRefused is a key whose history the target cannot hold: it refuses a version
// written right after a delete marker (405 MethodNotAllowed), or keeps it as another
// delete marker, as Versity S3 Gateway 1.8.0 does with its metadata in a sidecar
// directory (its PutObject leaves the marker's delete-marker attribute on the key: a
// write with a retention or legal hold is refused, one without is listed as a marker,
// which the check of a version after its write finds in a move of object lock). Copying
// the key again would only do the same: it fails by name, and the move does not cut
// over.
type historyRefused struct{ key string }

func (e *historyRefused) Error() string {
	return fmt.Sprintf("cannot hold this bucket's history: key %s has a version after a delete marker, which the target refuses (405 MethodNotAllowed) or lists as another delete marker; the move cannot cut over to this store",
		quoteKey(e.key))
}

// methodNotAllowed says whether the store answered 405: to a write, or to a HEAD of a
// version that is a delete marker.
func methodNotAllowed(err error) bool {
	var e *s3.Error
	return errors.As(err, &e) && (e.StatusCode == http.StatusMethodNotAllowed || e.Code == "MethodNotAllowed")
}
