package soak_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Knobs of the soak, from the environment:
//   - BUCKETKEEPER_SOAK_DURATION (a Go duration): the long form, rounds until it has
//     passed, on one seed. Unset: the short form of make test, shortRounds rounds on a
//     fixed seed, then as many on a random seed.
//   - BUCKETKEEPER_SOAK_SEED: run this seed only (the short form prints its random seed
//     for this). The operations drawn replay; their timing against the operator does
//     not, so a replay is a close retry rather than a recording.
//   - BUCKETKEEPER_SOAK_RESULTS: a directory to write soak.json and soak.md into
//     (make soak: bench/results).
//   - BUCKETKEEPER_SOAK_TRACE: a file to write every seed's trace into (the operations
//     run, settles, findings), which a failing run prints the end of anyway.
//   - BUCKETKEEPER_SOAK_LOGS: a directory to write the operator replicas' logs into,
//     kept after the run (every process of a replica appends to one file), for a
//     finding to be read against what the operator did; unset, they go to the test's
//     temporary directory and a failing run prints their ends.
const (
	envDuration = "BUCKETKEEPER_SOAK_DURATION"
	envSeed     = "BUCKETKEEPER_SOAK_SEED"
	envResults  = "BUCKETKEEPER_SOAK_RESULTS"
	envTrace    = "BUCKETKEEPER_SOAK_TRACE"
	envLogs     = "BUCKETKEEPER_SOAK_LOGS"
)

// fixedSeed is the short form's first seed: the same draws on every run.
const fixedSeed = 20261204

// opsPerRound is how many operations a round draws (the long form draws up to twice
// as many). Between two, the soak waits up to maxPause, so that the operator is caught
// in the middle of its work rather than only between bursts.
const (
	opsPerRound = 30
	maxPause    = 600 * time.Millisecond
	// shortRounds is the number of rounds of each seed in the short form.
	shortRounds = 2
)

type soakConfig struct {
	form     string // "short" or "long"
	duration time.Duration
	seeds    []uint64
	results  string
}

func configFromEnv(t *testing.T) soakConfig {
	c := soakConfig{form: "short", results: os.Getenv(envResults)}
	if d := os.Getenv(envDuration); d != "" {
		var err error
		if c.duration, err = time.ParseDuration(d); err != nil {
			t.Fatalf("%s=%q: %v", envDuration, d, err)
		}
		c.form = "long"
	}
	switch s := os.Getenv(envSeed); {
	case s != "":
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envSeed, s, err)
		}
		c.seeds = []uint64{seed}
	case c.form == "long":
		c.seeds = []uint64{randomSeed()}
	default:
		c.seeds = []uint64{fixedSeed, randomSeed()}
	}
	return c
}

func randomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) % 1_000_000_000 // short enough to type
}

// TestSoak is the soak (see the package comment and the knobs above). It fails when
// the checker finds anything after a round has settled, when a round does not settle
// in time, or when the operator panics.
func TestSoak(t *testing.T) {
	cfg := configFromEnv(t)
	ctx := t.Context()
	started := time.Now()
	rig := newRig(t, ctx)
	stats := newStats(cfg, rig)
	for _, seed := range cfg.seeds {
		t.Logf("soak seed %d (replay: %s=%d)", seed, envSeed, seed)
		run := newSoakRun(t, ctx, rig, seed, stats)
		run.soak(cfg)
	}
	stats.count(func(s *summary) { s.LateLanded = rig.lateLanded() })
	sum := stats.finish(time.Since(started))
	t.Logf("soak summary:\n%s", sum.markdown())
	if cfg.results != "" {
		must(t, sum.write(cfg.results))
		t.Logf("summary written to %s/soak.json and soak.md", cfg.results)
	}
	for _, f := range sum.Findings {
		t.Errorf("seed %d round %d: %s: %s: %s", f.Seed, f.Round, f.Invariant, f.Object, f.Found)
	}
	for _, p := range sum.Panics {
		t.Errorf("the operator panicked: %s", p)
	}
	if len(sum.Invalid) > 0 {
		t.Errorf("the soak sent objects the API refused as invalid (a bug of the soak): %v", sum.Invalid)
	}
}

// soakRun is one seed's run.
type soakRun struct {
	t       *testing.T
	ctx     context.Context
	rig     *rig
	rng     *mrand.Rand
	seed    uint64
	round   int
	seq     int
	tenants []*tenant
	stats   *stats

	mu      sync.Mutex
	timers  []pendingTimer
	pending sync.WaitGroup
	trace   []string
}

func newSoakRun(t *testing.T, ctx context.Context, rig *rig, seed uint64, stats *stats) *soakRun {
	r := &soakRun{t: t, ctx: ctx, rig: rig, seed: seed, stats: stats, rng: mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for _, name := range tenantNames {
		r.tenants = append(r.tenants, &tenant{name: name})
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d, the operations run (last 200):\n%s", seed, strings.Join(lastN(r.trace, 200), "\n"))
		}
		if path := os.Getenv(envTrace); path != "" {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
			if err == nil {
				_, err = fmt.Fprintln(f, strings.Join(r.trace, "\n"))
				err = errors.Join(err, f.Close())
			}
			if err != nil {
				t.Errorf("writing the trace: %v", err)
			}
		}
	})
	return r
}

// soak runs rounds: the short form shortRounds, the long form until its duration has
// passed.
// Kubernetes' own controllers run beside it throughout (kube_test.go). At the end every
// tenant namespace is deleted and the last round settles on an empty cluster.
func (r *soakRun) soak(cfg soakConfig) {
	bg, stopBG := context.WithCancel(r.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.background(bg)
	}()
	defer func() {
		stopBG()
		<-done
	}()
	until := time.Now().Add(cfg.duration)
	for {
		r.round++
		n := opsPerRound
		if cfg.form == "long" {
			n += r.pick(opsPerRound)
		}
		kills, outages := r.stats.chaos()
		for i := range n {
			if i == n/2 { // every round cuts into the operator's work at least once of each kind
				k, o := r.stats.chaos()
				if k == kills {
					r.run(opNamed("kill-operator"))
				}
				if o == outages {
					r.run(opNamed("store-outage"))
				}
			}
			r.step()
			time.Sleep(time.Duration(r.pick(int(maxPause))))
		}
		r.heal()
		r.settle(fmt.Sprintf("round %d", r.round))
		r.stats.count(func(s *summary) { s.Rounds++ })
		if cfg.form == "short" && r.round >= shortRounds || cfg.form == "long" && time.Now().After(until) || r.ctx.Err() != nil {
			break
		}
	}
	r.teardown()
}

// step draws operations until one finds something to act on (at most a few draws).
func (r *soakRun) step() {
	for range 5 {
		if !r.run(r.draw()) {
			return
		}
	}
}

func (r *soakRun) draw() op {
	total := 0
	for _, o := range operations {
		total += o.weight
	}
	n := r.pick(total)
	for _, c := range operations {
		if n < c.weight {
			return c
		}
		n -= c.weight
	}
	return operations[0]
}

func opNamed(name string) op {
	for _, o := range operations {
		if o.name == name {
			return o
		}
	}
	panic("no operation " + name)
}

// run runs one operation, records its outcome and says whether it was skipped.
func (r *soakRun) run(o op) (skipped bool) {
	r.seq++
	what, err := o.run(r)
	outcome := "ok"
	switch {
	case errors.Is(err, errSkipped):
		outcome = "skipped"
	case err != nil && raced(err):
		outcome = "raced: " + err.Error()
	case err != nil:
		outcome = "failed: " + err.Error()
	}
	r.stats.count(func(s *summary) {
		switch {
		case errors.Is(err, errSkipped):
			s.Skipped[o.name]++
		case err != nil && raced(err):
			s.Raced[o.name]++
		case err != nil:
			s.Failed[o.name]++
			if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
				s.Invalid = append(s.Invalid, o.name+": "+err.Error())
			}
		default:
			s.Operations[o.name]++
		}
	})
	r.logf("#%d %s %s: %s", r.seq, o.name, what, outcome)
	return errors.Is(err, errSkipped)
}

// background runs Kubernetes' namespace and garbage collectors and restarts replicas
// that exited on their own, every second until ctx ends.
func (r *soakRun) background(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		for what, f := range map[string]func(context.Context) error{"namespace controller": finishNamespaces, "garbage collector": collectGarbage} {
			if err := f(ctx); err != nil && ctx.Err() == nil {
				r.logf("%s: %v", what, err)
			}
		}
		r.watchReplicas()
	}
}

// logf records a line of the run's trace, printed when the test fails.
func (r *soakRun) logf(format string, args ...any) {
	line := fmt.Sprintf("%s seed %d r%d ", time.Now().Format("15:04:05.000"), r.seed, r.round) + fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.trace = append(r.trace, line)
	r.mu.Unlock()
}

func lastN(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}

func (rg *rig) store(name string) *storeRig {
	for _, sr := range rg.stores {
		if sr.name == name {
			return sr
		}
	}
	return nil
}
