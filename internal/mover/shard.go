package mover

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/semaphore"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// Options are what a mover process brings besides its spec: where checkpoints live,
// who it is, and what it may observe.
type Options struct {
	Checkpoints Checkpoints
	// Writer names this mover in its checkpoints (the pod's name); a random suffix is
	// added so that two runs of one pod differ.
	Writer string
	Log    logr.Logger
	// Now is the clock checkpoints are stamped with (nil: time.Now).
	Now func() time.Time
}

// shard is one run of one shard's pass.
type shard struct {
	spec   *Spec
	index  int
	r      KeyRange
	limits Limits
	stores Stores
	opts   Options
	log    logr.Logger

	// transfers bounds the streams (GET into a write) in flight: Limits.Concurrency.
	transfers *semaphore.Weighted
	buffers   sync.Pool // []byte of Limits.SmallObject, for objects read whole
	eq        *equivalences
	// tagCounts: the source sends x-amz-tagging-count (see meta).
	tagCounts atomic.Bool
	// srcLocks and tgtLocks read the versions' locks (lockread.go).
	srcLocks, tgtLocks *lockSide

	mu    sync.Mutex
	cp    *Checkpoint
	dirty bool
	// saveMu serializes checkpoint writes.
	saveMu sync.Mutex
}

// RunShard runs spec's pass for one shard (or the plan, for ModePlan with shard 0)
// to its end, resuming the shard's checkpoint if a run of the same pass stopped
// before. It returns nil once the pass is done and recorded (also when it already
// was), an error when it stopped early: the checkpoint then holds how far it got,
// and running it again continues from there.
func RunShard(ctx context.Context, spec *Spec, index int, stores Stores, opts Options) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	opts.Writer += "-" + hex.EncodeToString(suffix)
	shardIndex := index
	if spec.Mode == ModePlan {
		shardIndex = PlanShard
	}
	r, err := spec.Range(max(index, 0))
	if err != nil {
		return err
	}
	s := &shard{
		spec: spec, index: shardIndex, r: r, limits: spec.Limits.WithDefaults(), stores: stores, opts: opts,
		log: opts.Log.WithValues("move", spec.MoveID, "shard", shardIndex, "pass", spec.Pass, "mode", spec.Mode),
	}
	s.transfers = semaphore.NewWeighted(int64(s.limits.Concurrency))
	s.srcLocks, s.tgtLocks = newLockSide(stores.Source, spec.Source.Bucket), newLockSide(stores.Target, spec.Target.Bucket)
	s.tagCounts.Store(spec.Source.SendsTagCount)
	s.buffers.New = func() any { b := make([]byte, s.limits.SmallObject); return &b }

	run, err := s.begin(ctx)
	if err != nil || !run {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	saved := make(chan struct{})
	go func() { defer close(saved); s.saveEvery(ctx, cancel) }()
	err = s.run(ctx)
	cancel(nil)
	<-saved
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, ErrSuperseded) {
		err = cause
	}
	return s.end(err)
}

// begin loads the checkpoint and decides: resume this pass, start it, or nothing to
// do (already done).
func (s *shard) begin(ctx context.Context) (bool, error) {
	cp, err := s.opts.Checkpoints.Load(ctx, s.spec.MoveID, s.index)
	if err != nil {
		return false, err
	}
	now := s.opts.Now()
	switch {
	case cp == nil:
		cp = &Checkpoint{MoveID: s.spec.MoveID, Shard: s.index, equivalent: newEquivalences()}
	case cp.Pass > s.spec.Pass:
		return false, fmt.Errorf("%w: the checkpoint is of pass %d, this mover runs pass %d", ErrSuperseded, cp.Pass, s.spec.Pass)
	case cp.Pass == s.spec.Pass && cp.Phase == PhaseDone:
		s.log.Info("pass already done")
		return false, nil
	}
	if cp.equivalent == nil {
		cp.equivalent = newEquivalences()
	}
	if cp.Pass != s.spec.Pass || cp.Mode != s.spec.Mode {
		// A new pass keeps what outlives passes: the move's totals, the uploads in
		// flight, the ETag equivalences.
		*cp = Checkpoint{
			MoveID: cp.MoveID, Shard: cp.Shard, Moved: cp.Moved, Uploads: cp.Uploads, equivalent: cp.equivalent,
			Pass: s.spec.Pass, Mode: s.spec.Mode, Phase: PhaseCopying, Started: now,
		}
		if s.spec.Mode == ModeVerify {
			cp.Phase = PhaseVerifying
		}
	}
	cp.Runs++
	cp.Writer, cp.RunStarted, cp.Updated, cp.LastError = s.opts.Writer, now, now, ""
	s.cp, s.eq = cp, cp.equivalent
	s.log.Info("pass starting", "run", cp.Runs, "cursor", cp.Cursor)
	return true, s.save(ctx)
}

// run carries the pass out from where the checkpoint is.
func (s *shard) run(ctx context.Context) error {
	if s.spec.Mode == ModePlan {
		return s.plan(ctx)
	}
	if err := s.checkBuckets(ctx); err != nil {
		return err
	}
	if s.phase() == PhaseCopying {
		if err := s.sweepUploads(ctx); err != nil {
			return err
		}
		if err := s.copyPass(ctx); err != nil {
			return err
		}
		if s.spec.Mode == ModeCopy {
			return nil
		}
		s.mu.Lock()
		s.cp.Phase, s.cp.Cursor, s.dirty = PhaseVerifying, "", true
		s.mu.Unlock()
		if err := s.save(ctx); err != nil {
			return err
		}
	}
	return s.verifyPass(ctx)
}

// end records how the run ended: done, or stopped with an error the next run
// resumes after.
func (s *shard) end(runErr error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.mu.Lock()
	now := s.opts.Now()
	s.cp.Updated = now
	if errors.Is(runErr, errTooManyFailures) {
		// Running the pass again would fail the same keys: it is over, and its
		// failures say why the move cannot cut over.
		s.cp.LastError, runErr = reason(runErr), nil
		s.cp.Phase, s.cp.Finished = PhaseDone, &now
	} else if runErr == nil {
		s.cp.Phase, s.cp.Finished, s.cp.Cursor = PhaseDone, &now, ""
		if s.cp.Runs == 1 {
			s.eq.prune() // every record still in use was consulted in this one run
		}
	} else {
		s.cp.LastError = reason(runErr) // tenants read it; the caller logs the whole error
	}
	s.dirty = true
	s.mu.Unlock()
	if errors.Is(runErr, ErrSuperseded) {
		return runErr // the checkpoint is another mover's now
	}
	if err := s.save(ctx); err != nil {
		return errors.Join(runErr, err)
	}
	if runErr == nil {
		c := s.snapshot()
		s.log.Info("pass done", "copied", c.Counts.CopiedObjects, "copiedBytes", c.Counts.CopiedBytes,
			"unchanged", c.Counts.UnchangedObjects, "deleted", c.Counts.Deleted, "changed", c.Counts.Changed,
			"failures", c.Failures.Count, "differences", c.Differences.Count, "verified", c.Verified)
	}
	return runErr
}

func (s *shard) phase() Phase {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cp.Phase
}

// update changes the checkpoint under the lock.
func (s *shard) update(fn func(cp *Checkpoint)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.cp)
	s.dirty = true
}

// snapshot is a copy of the checkpoint, safe to read and write out.
func (s *shard) snapshot() Checkpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *s.cp
	c.Uploads = append([]Upload(nil), s.cp.Uploads...)
	c.Failures.First = append([]Failure(nil), s.cp.Failures.First...)
	c.Differences.First = append([]Failure(nil), s.cp.Differences.First...)
	return c
}

// save writes the checkpoint now.
func (s *shard) save(ctx context.Context) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	s.cp.Updated = s.opts.Now()
	s.dirty = false
	s.mu.Unlock()
	c := s.snapshot()
	return s.opts.Checkpoints.Save(ctx, &c)
}

// saveEvery writes the checkpoint every CheckpointInterval while it changed, until
// ctx ends. A superseded mover stops its pass.
func (s *shard) saveEvery(ctx context.Context, stop context.CancelCauseFunc) {
	t := time.NewTicker(s.limits.CheckpointInterval.Duration)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		dirty := s.dirty
		s.mu.Unlock()
		if !dirty {
			continue
		}
		if err := s.save(ctx); err != nil {
			if errors.Is(err, ErrSuperseded) {
				stop(err)
				return
			}
			s.log.Error(err, "writing the checkpoint; trying again at the next interval")
		}
	}
}

// checkBuckets fails early when a bucket is missing, the target cannot keep versions
// a VersionsAll move copies, or has no object lock for a move of object lock.
func (s *shard) checkBuckets(ctx context.Context) error {
	if _, err := s.stores.Source.HeadBucket(ctx, s.spec.Source.Bucket); err != nil {
		return onSource(err)
	}
	if _, err := s.stores.Target.HeadBucket(ctx, s.spec.Target.Bucket); err != nil {
		return onTarget(err)
	}
	if s.spec.ObjectLock != nil {
		lock, err := s.stores.Target.GetObjectLockConfiguration(ctx, s.spec.Target.Bucket)
		if err != nil {
			return onTarget(err)
		}
		if !lock.Enabled {
			return fmt.Errorf("target bucket %s has no object lock: a move of object lock writes every version with its lock", s.spec.Target.Bucket)
		}
	}
	if s.spec.Versions != VersionsAll {
		return nil
	}
	v, err := s.stores.Target.GetBucketVersioning(ctx, s.spec.Target.Bucket)
	if err != nil {
		return onTarget(err)
	}
	if v != s3.VersioningEnabled {
		return fmt.Errorf("target bucket %s has versioning %q: a move of every version needs it Enabled", s.spec.Target.Bucket, v)
	}
	return nil
}
