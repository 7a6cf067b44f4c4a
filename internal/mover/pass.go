package mover

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// A pass walks the shard's keys on both stores side by side, in key order (a merge
// join of two listings), so it holds two listing pages and the keys in flight, never
// a bucket's worth of keys. A copy pass hands each key that differs to a worker; a
// verifying pass only counts them.

// task is the work on one key that differs.
type task struct {
	id       uint64
	key      string
	src, tgt []s3.ObjectEntry // nil: the key is not on that side
}

// errTooManyFailures ends a pass whose failures passed Limits.MaxFailures.
var errTooManyFailures = errors.New("too many keys could not be copied")

// copyPass makes the target's shard equal to the source's as listed.
func (s *shard) copyPass(ctx context.Context) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	versions := s.spec.Versions == VersionsAll
	cursor := s.snapshot().Cursor
	src := listRange(ctx, s.stores.Source, s.spec.Source.Bucket, versions, s.r, cursor)
	tgt := listRange(ctx, s.stores.Target, s.spec.Target.Bucket, versions, s.r, cursor)
	tr := newTracker(cursor)
	tasks := make(chan task)
	var wg sync.WaitGroup
	for range s.limits.Concurrency {
		wg.Go(func() {
			for t := range tasks {
				if s.settle(ctx, t, s.do(ctx, t), stop) {
					tr.finish(t.id)
					s.setCursor(tr.position())
				}
			}
		})
	}
	err := join(ctx, src, tgt, func(key string, sg, tg []s3.ObjectEntry) {
		s.listed(sg)
		if s.sameHistory(key, sg, tg) {
			// In a move of object lock too: the locks of what is on both sides are
			// the final pass's to compare (lockread.go).
			s.unchanged(sg)
			tr.add(key, true)
			s.setCursor(tr.position())
			return
		}
		t := task{id: tr.add(key, false), key: key, src: sg, tgt: tg}
		select {
		case tasks <- t:
		case <-ctx.Done():
		}
	})
	close(tasks)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if err == nil {
		s.abortStale(ctx)
	}
	return err
}

// verifyPass lists both sides and records every key that differs. In a move of object
// lock, a key whose versions are equal is compared version by version for their locks
// too, by the workers (lockDifference: requests to both stores per version): one
// locked less on the target differs, and in a final pass is locked as on the source.
func (s *shard) verifyPass(ctx context.Context) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	versions := s.spec.Versions == VersionsAll
	cursor := s.snapshot().Cursor
	src := listRange(ctx, s.stores.Source, s.spec.Source.Bucket, versions, s.r, cursor)
	tgt := listRange(ctx, s.stores.Target, s.spec.Target.Bucket, versions, s.r, cursor)
	tr := newTracker(cursor)
	differs := func(key, why string) {
		s.update(func(cp *Checkpoint) { cp.Differences.add(Failure{Key: key, Reason: why}) })
	}
	tasks := make(chan task)
	var wg sync.WaitGroup
	for range s.limits.Concurrency {
		wg.Go(func() {
			for t := range tasks {
				why, err := s.lockDifference(ctx, t.key, t.src, t.tgt, s.spec.Mode == ModeFinal)
				switch {
				case ctx.Err() != nil:
					continue // cut short: the cursor stays before the key
				case fatal(err):
					stop(err)
					continue
				case errors.As(err, new(*lockRefused)):
					// A lock the target may not hold, set on the source since its
					// plan: no pass fixes it.
					s.update(func(cp *Checkpoint) { cp.Failures.add(Failure{Key: t.key, Reason: reason(err)}) })
				case err != nil:
					why = "locks not compared: " + reason(err)
				}
				if why != "" {
					differs(t.key, why)
				}
				tr.finish(t.id)
				s.setCursor(tr.position())
			}
		})
	}
	err := join(ctx, src, tgt, func(key string, sg, tg []s3.ObjectEntry) {
		switch {
		case !s.sameHistory(key, sg, tg):
			differs(key, difference(sg, tg))
		case s.spec.ObjectLock != nil:
			select {
			case tasks <- task{id: tr.add(key, false), key: key, src: sg, tgt: tg}:
			case <-ctx.Done():
			}
			return
		}
		tr.add(key, true)
		s.setCursor(tr.position())
	})
	close(tasks)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if err != nil {
		return err
	}
	s.update(func(cp *Checkpoint) { cp.Verified = cp.Differences.Count == 0 && cp.Failures.Count == 0 })
	return nil
}

// difference says how a key differs, for a Differences entry.
func difference(src, tgt []s3.ObjectEntry) string {
	switch {
	case len(tgt) == 0:
		return "missing on the target"
	case len(src) == 0:
		return "on the target only"
	case len(src) != len(tgt):
		return fmt.Sprintf("%d versions on the source, %d on the target", len(src), len(tgt))
	default:
		return "different size or content"
	}
}

// join walks two listings in key order and calls emit for every key of either, with
// the key's entries on each side (nil where it is missing).
func join(ctx context.Context, src, tgt *lister, emit func(key string, src, tgt []s3.ObjectEntry)) error {
	sg, sok := src.next()
	tg, tok := tgt.next()
	for sok || tok {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		switch {
		case sok && (!tok || sg.key < tg.key):
			emit(sg.key, sg.entries, nil)
			sg, sok = src.next()
		case tok && (!sok || tg.key < sg.key):
			emit(tg.key, nil, tg.entries)
			tg, tok = tgt.next()
		default:
			emit(sg.key, sg.entries, tg.entries)
			sg, sok = src.next()
			tg, tok = tgt.next()
		}
	}
	if err := errors.Join(onSource(src.err), onTarget(tgt.err)); err != nil {
		return err
	}
	return context.Cause(ctx)
}

// do carries out one key's task. A key that a request's path would turn into another
// is not written at all (keys.go); its deletion from the target goes in a request's
// body, as every deletion does.
func (s *shard) do(ctx context.Context, t task) error {
	if len(t.src) > 0 {
		if err := checkKey(t.key); err != nil {
			return err
		}
	}
	switch {
	case s.spec.Versions == VersionsAll:
		return s.copyHistory(ctx, t.key, t.src, t.tgt)
	case len(t.src) == 0:
		return s.deleteOnTarget(ctx, []s3.ObjectID{{Key: t.key}})
	default:
		return s.copyObject(ctx, t.key, t.src[0])
	}
}

// settle records how a task ended: done, changed under the pass (the next pass
// copies it), a failure of its key, or an error that stops the pass. It says whether
// the key is done with for this pass: a key whose work was cut short (the pass
// stopping) is not, so the cursor stays before it and a resumed pass does it again.
func (s *shard) settle(ctx context.Context, t task, err error, stop context.CancelCauseFunc) bool {
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return false
	case changedUnderUs(err):
		s.update(func(cp *Checkpoint) { cp.Counts.Changed++ })
	case fatal(err):
		stop(err)
		return false
	default:
		var many bool
		s.update(func(cp *Checkpoint) {
			cp.Failures.add(Failure{Key: t.key, Reason: reason(err)})
			many = cp.Failures.Count >= s.limits.MaxFailures
		})
		s.log.Info("key not copied", "key", t.key, "reason", reason(err), "error", err.Error())
		if many {
			stop(fmt.Errorf("%w: %d keys failed, the most a pass goes on after", errTooManyFailures, s.limits.MaxFailures))
		}
	}
	return true
}

// unchanged counts a key found equal on the target.
func (s *shard) unchanged(entries []s3.ObjectEntry) {
	s.update(func(cp *Checkpoint) {
		cp.Counts.UnchangedObjects += int64(len(entries))
		cp.Counts.UnchangedBytes += keyGroup{entries: entries}.size()
	})
}

func (s *shard) listed(entries []s3.ObjectEntry) {
	if len(entries) == 0 {
		return
	}
	s.update(func(cp *Checkpoint) {
		cp.Counts.ListedObjects += int64(len(entries))
		cp.Counts.ListedBytes += keyGroup{entries: entries}.size()
	})
}

func (s *shard) setCursor(c string) {
	s.update(func(cp *Checkpoint) { cp.Cursor = c })
}

// deleteOnTarget removes objects (or versions) from the target: the source no longer
// has them.
func (s *shard) deleteOnTarget(ctx context.Context, ids []s3.ObjectID) error {
	err := retryTransient(ctx, func() error { return s.stores.Target.DeleteObjects(ctx, s.spec.Target.Bucket, ids) })
	if err != nil {
		return onTarget(err)
	}
	s.update(func(cp *Checkpoint) { cp.Counts.Deleted += int64(len(ids)) })
	return nil
}
