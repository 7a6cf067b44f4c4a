package probe

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestBudgetDelaysWithoutDropping puts 1,000 keys due at the same instant on
// a store limited to 10/s (burst 10) and 1,000 on an unlimited store.
func TestBudgetDelaysWithoutDropping(t *testing.T) {
	const n, perSec, burst = 1000, 10, 10
	h := newHarness(t, Options{})
	h.s.SetBudget("slow", perSec, burst)
	h.s.SetBudget("fast", 0, 0) // explicitly unlimited
	slow, fast := map[types.NamespacedName]bool{}, map[types.NamespacedName]bool{}
	for i := range n {
		k := testKey(i)
		slow[k] = true
		h.s.Schedule(k, "slow", t0)
		k = testKey(n + i)
		fast[k] = true
		h.s.Schedule(k, "fast", t0)
	}
	h.start()
	h.step(120)

	evs := h.snapshot()
	var slowEvs, fastEvs []received
	for _, e := range evs {
		switch {
		case slow[e.key]:
			slowEvs = append(slowEvs, e)
		case fast[e.key]:
			fastEvs = append(fastEvs, e)
		default:
			t.Fatalf("unexpected key %v", e.key)
		}
	}
	// The unlimited store is not held back by the limited one.
	if len(fastEvs) != n || perSecond(fastEvs, 0)[0] != n {
		t.Fatalf("fast store: %d events, %d at t0; want all %d at t0", len(fastEvs), perSecond(fastEvs, 0)[0], n)
	}
	// Nothing dropped, nothing duplicated.
	if got := byKey(slowEvs); len(got) != n || len(slowEvs) != n {
		t.Fatalf("slow store: %d events for %d keys, want %d each", len(slowEvs), len(got), n)
	}
	counts := perSecond(slowEvs, 120)
	last, cum := 0, 0
	for sec, c := range counts {
		cum += c
		if c > 0 {
			last = sec
		}
		// Burst at t0, then at most the budget per second: delayed entries
		// are paced, they never come out in a burst.
		limit := perSec
		if sec == 0 {
			limit = burst
		}
		if c > limit || cum > burst+perSec*sec {
			t.Fatalf("second %d: %d events (cumulative %d), budget %d/s burst %d; counts %v", sec, c, cum, perSec, burst, counts)
		}
	}
	if want := (n - burst) / perSec; last < want-1 || last > want+1 {
		t.Fatalf("last slow event at second %d, want ~%d", last, want)
	}
	if h.s.Len() != 0 {
		t.Fatalf("Len = %d, want 0", h.s.Len())
	}
	// The lag metric sees the budget delay.
	maxLag := time.Duration(0)
	for k := range slow {
		maxLag = max(maxLag, h.lag(k))
	}
	t.Logf("slow store drained in %ds of fake time, max lag %v, counts/s %v", last, maxLag, counts[:5])
	if maxLag < time.Duration(last-1)*time.Second {
		t.Fatalf("max lag %v, want ~%ds", maxLag, last)
	}
}

// TestBudgetRemovalReleasesDelayed checks that lifting a budget releases the
// entries waiting for tokens immediately.
func TestBudgetRemovalReleasesDelayed(t *testing.T) {
	const n = 100
	h := newHarness(t, Options{})
	h.s.SetBudget("s", 1, 1)
	for i := range n {
		h.s.Schedule(testKey(i), "s", t0)
	}
	h.start()
	if got := len(h.snapshot()); got != 1 {
		t.Fatalf("%d events at t0 with burst 1, want 1", got)
	}
	h.s.SetBudget("s", 2, 5) // changing keeps reservations
	h.settle()
	h.s.SetBudget("s", 0, 0)
	h.settle()
	if got := len(h.snapshot()); got != n {
		t.Fatalf("%d events after removing the budget, want %d", got, n)
	}
}

// TestStartStopsOnCancel covers the Runnable contract, including a loop
// blocked on a full channel.
func TestStartStopsOnCancel(t *testing.T) {
	s := NewScheduler(clocktesting.NewFakeClock(t0), Options{})
	if !s.NeedLeaderElection() {
		t.Fatal("NeedLeaderElection = false")
	}
	if s.Source() == nil {
		t.Fatal("Source() = nil")
	}
	for name, setup := range map[string]func(*Scheduler){
		"idle on timer": func(s *Scheduler) { s.Schedule(testKey(1), "s", t0.Add(time.Hour)) },
		"idle, empty":   func(*Scheduler) {},
		"blocked send": func(s *Scheduler) {
			for i := range 3 {
				s.Schedule(testKey(i), "s", t0)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := NewScheduler(clocktesting.NewFakeClock(t0), Options{BufferSize: 1})
			setup(s)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Start(ctx) }()
			waitFor(t, func() bool {
				_, idle := s.quiescent()
				s.mu.Lock()
				defer s.mu.Unlock()
				return idle || s.abort != nil
			})
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Start returned %v, want nil", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Start did not return after cancel")
			}
		})
	}
}

// TestFullChannelWaitsAndForgetAbandons: with a full channel the loop waits
// instead of dropping, and Forget cancels the blocked send.
func TestFullChannelWaitsAndForgetAbandons(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	s := NewScheduler(fc, Options{BufferSize: 1})
	for i := range 4 {
		s.Schedule(testKey(i), "s", t0)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Start(ctx) }()

	inflight := func() types.NamespacedName {
		var k types.NamespacedName
		waitFor(t, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			k = s.inflight
			return s.abort != nil
		})
		return k
	}
	forgotten := inflight() // one event buffered, the next blocked
	s.Forget(forgotten)
	// The channel is still full, so the abandoned send can only have taken the abort:
	// wait until the loop blocks on the next key before reading any event. (Reading
	// earlier would make room, and a sender that wakes to both a closed abort and room
	// picks either: Forget is best effort once the channel can take the event.)
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.abort != nil && s.inflight != forgotten
	})
	got := map[types.NamespacedName]bool{}
	for range 3 {
		select {
		case ev := <-s.Events():
			got[types.NamespacedName{Namespace: ev.Object.GetNamespace(), Name: ev.Object.GetName()}] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d events delivered, want 3", len(got))
		}
	}
	if got[forgotten] || len(got) != 3 {
		t.Fatalf("got %v; forgotten %v must be absent and the other 3 present", got, forgotten)
	}
	waitFor(t, func() bool { _, idle := s.quiescent(); return idle })
	if len(s.Events()) != 0 || s.Len() != 0 {
		t.Fatalf("leftover events %d, Len %d", len(s.Events()), s.Len())
	}
}

// TestSourceEnqueuesRequests wires Source() to a workqueue, as a controller
// Watch would.
func TestSourceEnqueuesRequests(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	s := NewScheduler(fc, Options{})
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Source().Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Start(ctx) }()
	k := testKey(7)
	s.Schedule(k, "s", t0)
	got := make(chan reconcile.Request, 1)
	go func() {
		if r, shutdown := q.Get(); !shutdown {
			got <- r
		}
	}()
	select {
	case r := <-got:
		if r.NamespacedName != k {
			t.Fatalf("request %v, want %v", r, k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no request enqueued")
	}
}

// waitFor polls cond with tiny real sleeps (goroutine hand-off only).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(20 * time.Microsecond)
	}
}
