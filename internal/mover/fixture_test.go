package mover_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// moveFixture is one move between two test buckets, run in-process.
type moveFixture struct {
	t        *testing.T
	id       string
	src, tgt side
	runner   *mover.InProcess
	spec     mover.Spec
	requests *requestCount
}

// newMove is a move of src's objects (every version, with all) onto tgt.
func newMove(t *testing.T, src, tgt side, versions mover.VersionsMode) *moveFixture {
	t.Helper()
	f := &moveFixture{t: t, id: moveID(t), src: src, tgt: tgt, requests: &requestCount{}}
	f.runner = &mover.InProcess{Checkpoints: checkpoints(), Log: testr.New(t), Backoff: 200 * time.Millisecond, Observe: f.requests.observe,
		Factory: recordedFactory}
	f.spec = mover.Spec{
		MoveID: f.id, Versions: versions,
		Source: bucketOf(src), Target: bucketOf(tgt),
		Limits: mover.Limits{CheckpointInterval: mover.Duration{Duration: time.Second}},
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := f.runner.Forget(ctx, f.id); err != nil {
			t.Errorf("forgetting move %s: %v", f.id, err)
		}
		f.runner.Close()
	})
	return f
}

func bucketOf(s side) mover.Bucket {
	return mover.Bucket{Endpoint: s.srv.Endpoint, Region: s.srv.Region, ForcePathStyle: true, Bucket: s.bucket}
}

func credentialsOf(srv *testenv.S3Server) mover.Credentials {
	return mover.Credentials{AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey}
}

// run runs pass (in mode) to its end and returns its progress.
func (f *moveFixture) run(mode mover.Mode, pass int) mover.Progress {
	f.t.Helper()
	f.start(mode, pass)
	shards := f.spec.RunShards()
	if mode == mover.ModePlan {
		shards = 0
	}
	p := waitPass(f.t, f.runner, f.id, pass, max(shards, 1), 5*time.Minute)
	f.t.Logf("pass %d (%s): %+v", pass, mode, p.Counts)
	return p
}

// start starts pass in mode without waiting.
func (f *moveFixture) start(mode mover.Mode, pass int) {
	f.t.Helper()
	spec := f.spec
	spec.Mode, spec.Pass = mode, pass
	err := f.runner.Start(context.Background(), mover.Move{Spec: spec, Source: credentialsOf(f.src.srv), Target: credentialsOf(f.tgt.srv)})
	if err != nil {
		f.t.Fatalf("starting pass %d: %v", pass, err)
	}
}

// plan runs a plan pass for shards and takes its boundaries into the spec.
func (f *moveFixture) plan(pass, shards int) *mover.Plan {
	f.t.Helper()
	f.spec.Shards = shards
	f.start(mover.ModePlan, pass)
	var plan *mover.Plan
	eventually(f.t, 2*time.Minute, "the plan", func() error {
		cp, err := checkpoints().Load(context.Background(), f.id, mover.PlanShard)
		switch {
		case err != nil:
			return err
		case cp == nil || cp.Pass != pass || cp.Phase != mover.PhaseDone:
			return errors.New("not done")
		}
		plan = cp.Plan
		return nil
	})
	f.spec.Boundaries = plan.Boundaries
	return plan
}

// requestCount counts the mover's requests per side and operation, and those that got
// no answer.
type requestCount struct {
	mu         sync.Mutex
	ops        map[string]int
	unanswered map[string]int
}

func (r *requestCount) observe(side, op string, status int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ops == nil {
		r.ops, r.unanswered = map[string]int{}, map[string]int{}
	}
	r.ops[side+" "+op]++
	if status == 0 && err != nil {
		r.unanswered[side]++
	}
}

func (r *requestCount) get(side string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unanswered[side]
}

// of counts side's requests of the operations ops.
func (r *requestCount) of(side string, ops ...string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, op := range ops {
		n += r.ops[side+" "+op]
	}
	return n
}

// reset forgets what was counted.
func (r *requestCount) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops, r.unanswered = nil, nil
}

// storeClient is the operator's own S3 client for srv's admin identity.
func storeClient(t *testing.T, srv *testenv.S3Server) s3.Client {
	t.Helper()
	c, err := s3.New(context.Background(), s3.Config{Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
		AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey, RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
