package integration_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/controller/objectstore"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// testShard is one operator deployment's ObjectStore reconciler, built as operator.New
// builds it with --shard-count: its own store clients, whose health-check requests it
// counts, its own Lease identity, and the clock all shards of the test share.
type testShard struct {
	t     *testing.T
	r     *objectstore.Reconciler
	store string

	mu sync.Mutex
	// pings counts the health checks' ListBuckets this shard sent to the store.
	pings int
	// verdicts counts the store verdicts this shard reported to its gauge.
	verdicts int
	// budget is what this shard's probe scheduler was given; clientRate and
	// clientBurst the token bucket of the S3 clients it built.
	budgetRate, clientRate   float64
	budgetBurst, clientBurst int
}

func newTestShard(t *testing.T, id, leaseNamespace, store string, shards int, clk *clocktesting.FakeClock) *testShard {
	s := &testShard{t: t, store: store}
	registry := &stores.Registry{Client: k8s, APIReader: k8s, Shards: shards,
		Factory: func(ctx context.Context, cfg s3.Config) (s3.Client, error) {
			s.mu.Lock()
			s.clientRate, s.clientBurst = float64(cfg.Limiter.Limit()), cfg.Limiter.Burst()
			s.mu.Unlock()
			return s3.New(ctx, cfg)
		},
		Observer: func(name, op string, _ int, _ error) {
			if name == store && op == "ListBuckets" {
				s.mu.Lock()
				s.pings++
				s.mu.Unlock()
			}
		},
	}
	s.r = &objectstore.Reconciler{
		Client: k8s, APIReader: k8s, Recorder: events.NewFakeRecorder(100), Stores: registry, Clock: clk,
		// No heartbeat write during the test: the suite's own manager checks the store
		// too and must not meet these shards' status patches.
		Heartbeat: time.Hour,
		Budget: func(name string, perSecond float64, burst int) {
			if name == store {
				s.mu.Lock()
				s.budgetRate, s.budgetBurst = perSecond, burst
				s.mu.Unlock()
			}
		},
		OnHealth: func(name string, ready *bool) {
			if name == store && ready != nil && *ready {
				s.mu.Lock()
				s.verdicts++
				s.mu.Unlock()
			}
		},
		Leases: &stores.Leases{Client: k8s, Reader: k8s, Namespace: leaseNamespace, Identity: id, Clock: clk},
	}
	return s
}

// reconcile runs one reconcile of the store, as the shard's work queue would.
func (s *testShard) reconcile(ctx context.Context) time.Duration {
	s.t.Helper()
	res, err := s.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: s.store}})
	must(s.t, err)
	return res.RequeueAfter
}

func (s *testShard) counts() (pings, verdicts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pings, s.verdicts
}

// TestShardsCheckAStoreOnce: two shards reconcile one store on every health-check
// interval, yet only the holder of the store's Lease sends the health check, the other
// reports the verdict the holder wrote and asks to come back when the Lease would
// expire; when the holder stops, the other takes over at that moment, and the old
// holder coming back steps aside. Both spend half the store's budget.
func TestShardsCheckAStoreOnce(t *testing.T) {
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) { s.Spec.RequestsPerSecond, s.Spec.Burst = 40, 10 })
	f.eventually(time.Minute, "the store to be Ready", func() error {
		store := &bkv1.ObjectStore{}
		must(t, k8s.Get(f.ctx, types.NamespacedName{Name: f.store}, store))
		if c := findStoreCond(store, bkv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("store conditions: %v", store.Status.Conditions)
		}
		return nil
	})
	const interval = 5 * time.Second // the fixture's spec.healthCheck.interval
	leaseDuration := interval + defaults.StoreLeaseGrace
	// Whole seconds: Lease times keep microseconds, and the waits below are exact.
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	a := newTestShard(t, "shard-a", f.ns, f.store, 2, clk)
	b := newTestShard(t, "shard-b", f.ns, f.store, 2, clk)

	lease := func() *coordinationv1.Lease {
		t.Helper()
		l := &coordinationv1.Lease{}
		must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: stores.LeaseName(f.store)}, l))
		return l
	}
	expectLease := func(holder string, renewed time.Time) {
		t.Helper()
		l := lease()
		if got := ptr.Deref(l.Spec.HolderIdentity, ""); got != holder {
			t.Fatalf("the store's Lease is held by %q, want %q", got, holder)
		}
		if l.Spec.RenewTime == nil || l.Spec.RenewTime.Sub(renewed).Abs() > time.Millisecond {
			t.Fatalf("the store's Lease was renewed at %v, want %v", l.Spec.RenewTime, renewed)
		}
		if got := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second; got != leaseDuration {
			t.Fatalf("the Lease lasts %s, want the interval plus the grace, %s", got, leaseDuration)
		}
	}

	// Shard a reconciles first and takes the Lease; from then on the order does not
	// matter: each interval, a checks and b does not.
	const steps = 6
	for i := range steps {
		first, second := a, b
		if i%2 == 1 {
			first, second = b, a
		}
		wait := map[*testShard]time.Duration{}
		wait[first] = first.reconcile(f.ctx)
		wait[second] = second.reconcile(f.ctx)
		aPings, aVerdicts := a.counts()
		bPings, bVerdicts := b.counts()
		if aPings != i+1 || bPings != 0 {
			t.Fatalf("after %d intervals shard a sent %d health checks and shard b %d: want %d and 0", i+1, aPings, bPings, i+1)
		}
		if aVerdicts != i+1 || bVerdicts != i+1 {
			t.Fatalf("after %d intervals the shards reported %d and %d verdicts, want %d each", i+1, aVerdicts, bVerdicts, i+1)
		}
		if wait[a] != interval {
			t.Fatalf("the holder comes back after %s, want the interval %s", wait[a], interval)
		}
		// b looks again when the Lease it read would expire: no hot loop. Reconciled
		// after a, it read the renewal of this interval; before a, that of the last.
		wantB := leaseDuration
		if first == b {
			wantB = leaseDuration - interval
		}
		if wait[b] != wantB {
			t.Fatalf("interval %d: the other shard comes back after %s, want when the Lease it read expires (%s)", i+1, wait[b], wantB)
		}
		expectLease("shard-a", clk.Now())
		clk.Step(interval)
	}
	lastRenewal := clk.Now().Add(-interval)

	// Shard a stops. b is woken before the Lease expires (a store event, say): it
	// still does not check, and asks to come back exactly at the expiry.
	wait := b.reconcile(f.ctx)
	if want := lastRenewal.Add(leaseDuration).Sub(clk.Now()); wait != want {
		t.Fatalf("before the expiry shard b comes back after %s, want %s", wait, want)
	}
	if pings, _ := b.counts(); pings != 0 {
		t.Fatalf("shard b checked a store whose Lease is held: %d health checks", pings)
	}
	clk.Step(wait)
	if wait := b.reconcile(f.ctx); wait != interval {
		t.Fatalf("the new holder comes back after %s, want the interval %s", wait, interval)
	}
	if pings, _ := b.counts(); pings != 1 {
		t.Fatalf("shard b sent %d health checks once the Lease expired, want 1", pings)
	}
	expectLease("shard-b", clk.Now())
	if got := ptr.Deref(lease().Spec.LeaseTransitions, 0); got != 1 {
		t.Fatalf("the Lease changed hands %d times, want 1", got)
	}
	if gap := clk.Now().Sub(lastRenewal); gap > leaseDuration {
		t.Fatalf("the store went %s without a check, more than the Lease's %s", gap, leaseDuration)
	}

	// Shard a comes back: b holds the Lease now, so a steps aside.
	aBefore, _ := a.counts()
	if wait := a.reconcile(f.ctx); wait != leaseDuration {
		t.Fatalf("the returning shard comes back after %s, want when b's Lease expires (%s)", wait, leaseDuration)
	}
	clk.Step(interval)
	b.reconcile(f.ctx)
	a.reconcile(f.ctx)
	if aPings, _ := a.counts(); aPings != aBefore {
		t.Fatalf("the returning shard sent %d health checks, want none", aPings-aBefore)
	}
	if bPings, _ := b.counts(); bPings != 2 {
		t.Fatalf("shard b sent %d health checks, want 2", bPings)
	}

	// Each shard's probe scheduler and S3 clients were given half the store's budget.
	for name, s := range map[string]*testShard{"a": a, "b": b} {
		s.mu.Lock()
		if s.budgetRate != 20 || s.budgetBurst != 5 || s.clientRate != 20 || s.clientBurst != 5 {
			t.Errorf("shard %s: scheduler budget %v/s burst %d, client budget %v/s burst %d; want 20/s burst 5 for both",
				name, s.budgetRate, s.budgetBurst, s.clientRate, s.clientBurst)
		}
		s.mu.Unlock()
	}
}

// TestStoreLeaseName: every store name, up to the 253 characters the API allows, gives
// a valid Lease name of its own.
func TestStoreLeaseName(t *testing.T) {
	long := strings.Repeat("a", 200)
	names := map[string]bool{}
	for _, store := range []string{"s3", "eu.west", long + "." + strings.Repeat("b", 52), long + "." + strings.Repeat("c", 52), long + strings.Repeat(".x", 26)} {
		name := stores.LeaseName(store)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("the Lease name of store %q, %q, is invalid: %v", store, name, errs)
		}
		if names[name] {
			t.Errorf("two stores share the Lease name %q", name)
		}
		names[name] = true
	}
	if got := stores.LeaseName("s3"); got != bkv1.StoreLeasePrefix+"s3" {
		t.Errorf("the Lease of store s3 is %q, want %q", got, bkv1.StoreLeasePrefix+"s3")
	}
}

// TestShardBudget: the shards' parts of a store's budget add up to no more than it.
func TestShardBudget(t *testing.T) {
	for _, c := range []struct {
		rate          float64
		burst, shards int
		wantRate      float64
		wantBurst     int
	}{
		{50, 100, 0, 50, 100}, // unset counts as one
		{50, 100, 1, 50, 100},
		{50, 100, 2, 25, 50},
		{50, 100, 3, 50.0 / 3, 33}, // rounded down: 3 x 33 <= 100
		{1, 1, 4, 0.25, 1},         // never a zero burst, which would refuse every request
		{0, 0, 2, 0, 0},            // no budget stays no budget (unlimited)
	} {
		rate, burst := stores.ShardBudget(c.rate, c.burst, c.shards)
		if rate != c.wantRate || burst != c.wantBurst {
			t.Errorf("stores.ShardBudget(%v, %d, %d) = %v, %d; want %v, %d", c.rate, c.burst, c.shards, rate, burst, c.wantRate, c.wantBurst)
		}
	}
}

// TestShardCountWiring runs a manager built by operator.New with ShardCount 2: its
// store clients get half the store's budget, and it takes the store's health-check
// Lease under its leader-election ID in the leader-election namespace.
func TestShardCountWiring(t *testing.T) {
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) { s.Spec.RequestsPerSecond, s.Spec.Burst = 30, 8 })
	// The factory does not learn the store's name: the manager builds clients for every
	// store of the suite, so record every budget and look for this store's.
	var mu sync.Mutex
	budgets := map[[2]float64]bool{}
	ctx, stopManager := context.WithCancel(f.ctx)
	done, err := startManager(ctx, operator.Options{
		WatchLabelSelector: isolatedLabel + "=" + f.ns, ShardCount: 2,
		LeaderElectionID: "shard-wiring", LeaderElectionNamespace: f.ns,
		S3Factory: func(ctx context.Context, cfg s3.Config) (s3.Client, error) {
			if cfg.Limiter != nil {
				mu.Lock()
				budgets[[2]float64{float64(cfg.Limiter.Limit()), float64(cfg.Limiter.Burst())}] = true
				mu.Unlock()
			}
			return s3.New(ctx, cfg)
		},
		S3Observer: func(string, string, int, error) {},
	})
	must(t, err)
	defer func() { stopManager(); <-done }()
	f.eventually(time.Minute, "the sharded manager to hold the store's Lease", func() error {
		l := &coordinationv1.Lease{}
		if err := k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: stores.LeaseName(f.store)}, l); err != nil {
			return err
		}
		if got := ptr.Deref(l.Spec.HolderIdentity, ""); got != "shard-wiring" {
			return fmt.Errorf("held by %q", got)
		}
		// The holder builds the store's client right after taking the Lease.
		mu.Lock()
		defer mu.Unlock()
		if !budgets[[2]float64{15, 4}] {
			return fmt.Errorf("no store client with half the store's budget (15/s, bursts of 4) yet; budgets seen: %v", budgets)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if budgets[[2]float64{30, 8}] {
		t.Fatalf("the sharded manager built a store client with the whole store's budget (30/s, 8): %v", budgets)
	}
}

// TestShardCountValidation: a shard count that cannot work is refused before the
// manager starts.
func TestShardCountValidation(t *testing.T) {
	for _, opts := range []operator.Options{
		{ShardCount: -1, WatchLabelSelector: "shard=a"},
		{ShardCount: 2}, // a shard with no selector would serve every bucket again
	} {
		if _, err := operator.New(cfg, opts); err == nil {
			t.Errorf("operator.New(%+v) succeeded, want an error", opts)
		}
	}
}
