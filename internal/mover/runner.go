package mover

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// Runner is what the StorageBucket reconciler drives a move with, one pass at a time.
// Every method is level-triggered: a reconcile calls Start with the pass it wants
// every time, and reads where the move is from Progress (the checkpoints), never
// from what it asked before, so a restarted operator carries on where the last
// one was. Jobs runs the mover subcommand (cmd/bucketkeeper/mover.go) in Indexed
// Jobs of the operator's namespace; InProcess runs the same code in goroutines of
// the calling process.
type Runner interface {
	// Start starts move's pass on every shard that has not finished it, unless it
	// runs already. It returns at once.
	Start(ctx context.Context, move Move) error
	// Progress reads pass of the move from the checkpoints of its shards.
	Progress(ctx context.Context, moveID string, pass, shards int) (Progress, error)
	// Cancel stops the move's running pass, if any, and returns once it stopped.
	Cancel(ctx context.Context, moveID string) error
	// Forget deletes what the move keeps (its checkpoints): once it is Done or
	// Aborted.
	Forget(ctx context.Context, moveID string) error
}

// Move is a pass to run and the keys it needs.
type Move struct {
	Spec           Spec
	Source, Target Credentials
	// Caps bound a mover pod's CPU and memory (the store admins'): a Job's pods get
	// the smaller of these and the runner's own. The in-process runner has no pods.
	Caps corev1.ResourceList
}

// RunShards is how many shards run the pass: one for a plan.
func (s *Spec) RunShards() int {
	if s.Mode == ModePlan {
		return 1
	}
	return s.ShardCount()
}

// InProcess runs passes in goroutines of the calling process behind Runner: where
// there is no kubelet to run Jobs (make dev), and in tests. Its shards restart after
// an error like a Job's pods do (with backoff), and stop with Cancel or Close.
type InProcess struct {
	Checkpoints Checkpoints
	// Factory builds the store clients (nil: s3.New); Observe sees their requests.
	Factory s3.Factory
	Observe func(side, op string, status int, err error)
	Log     logr.Logger
	// Backoff is the first wait before a failed shard runs again (doubling up to a
	// minute; zero: 1 s).
	Backoff time.Duration

	mu      sync.Mutex
	running map[string]*inProcessRun
	closed  bool
}

var _ Runner = (*InProcess)(nil)

type inProcessRun struct {
	pass   int
	mode   Mode
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs the pass in the background, unless this pass runs already. A run of an
// earlier pass still going is stopped first.
func (r *InProcess) Start(ctx context.Context, move Move) error {
	spec := move.Spec
	if err := spec.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return errors.New("the in-process mover is closed")
	}
	if r.running == nil {
		r.running = map[string]*inProcessRun{}
	}
	old := r.running[spec.MoveID]
	if old != nil && old.pass == spec.Pass && old.mode == spec.Mode {
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	if old != nil {
		old.cancel()
		<-old.done
	}
	stores, err := NewStores(ctx, &spec, move.Source, move.Target, r.Factory, r.Observe)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	run := &inProcessRun{pass: spec.Pass, mode: spec.Mode, cancel: cancel, done: make(chan struct{})}
	r.mu.Lock()
	r.running[spec.MoveID] = run
	r.mu.Unlock()
	go func() {
		defer close(run.done)
		var wg sync.WaitGroup
		slots := make(chan struct{}, runningShards(&spec, 0))
		for i := range spec.RunShards() {
			wg.Go(func() {
				select { // a shard waits for a slot as a Job's pod waits for its turn
				case slots <- struct{}{}:
				case <-runCtx.Done():
					return
				}
				defer func() { <-slots }()
				r.runShard(runCtx, &spec, i, stores)
			})
		}
		wg.Wait()
	}()
	return nil
}

// runningShards is how many shards of the pass run at once: every one, unless the
// spec (the store admins) or the runner (bound, the operator's flag; zero: none)
// says fewer.
func runningShards(spec *Spec, bound int) int {
	n := spec.RunShards()
	for _, b := range []int{spec.Parallelism, bound} {
		if b > 0 && b < n {
			n = b
		}
	}
	return n
}

// runShard runs one shard until its pass is done, again after each error.
func (r *InProcess) runShard(ctx context.Context, spec *Spec, i int, stores Stores) {
	wait := r.Backoff
	if wait <= 0 {
		wait = time.Second
	}
	for {
		err := RunShard(ctx, spec, i, stores, Options{Checkpoints: r.Checkpoints, Writer: "in-process", Log: r.Log})
		if err == nil || ctx.Err() != nil || errors.Is(err, ErrSuperseded) {
			return
		}
		r.Log.Error(err, "mover shard stopped; running it again", "move", spec.MoveID, "shard", i, "after", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// Progress reads the pass from the checkpoints.
func (r *InProcess) Progress(ctx context.Context, moveID string, pass, shards int) (Progress, error) {
	return progressOf(ctx, r.Checkpoints, moveID, pass, shards)
}

// progressOf reads a pass of a move from its checkpoints, whoever runs its movers.
func progressOf(ctx context.Context, checkpoints Checkpoints, moveID string, pass, shards int) (Progress, error) {
	cps, err := checkpoints.List(ctx, moveID)
	if err != nil {
		return Progress{}, err
	}
	return Summarize(cps, pass, shards, time.Now()), nil
}

// Cancel stops the move's run and waits for it.
func (r *InProcess) Cancel(ctx context.Context, moveID string) error {
	r.mu.Lock()
	run := r.running[moveID]
	delete(r.running, moveID)
	r.mu.Unlock()
	if run == nil {
		return nil
	}
	run.cancel()
	select {
	case <-run.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("move %s still stopping: %w", moveID, ctx.Err())
	}
}

// Forget cancels the move and deletes its checkpoints.
func (r *InProcess) Forget(ctx context.Context, moveID string) error {
	if err := r.Cancel(ctx, moveID); err != nil {
		return err
	}
	return r.Checkpoints.Delete(ctx, moveID)
}

// Close stops every run and waits for them: the operator is shutting down. The
// checkpoints stay; the next operator's Start resumes them.
func (r *InProcess) Close() {
	r.mu.Lock()
	r.closed = true
	runs := r.running
	r.running = nil
	r.mu.Unlock()
	for _, run := range runs {
		run.cancel()
		<-run.done
	}
}
