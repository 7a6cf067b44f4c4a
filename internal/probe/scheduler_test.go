package probe

import (
	"context"
	"math/rand"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const testInterval = 60 * time.Second

// TestSpreadAvoidsThunderingHerd schedules 10,000 keys on their slots and
// checks that no second carries much more than the average load, unlike a
// global ticker that enqueues everything at once.
func TestSpreadAvoidsThunderingHerd(t *testing.T) {
	const n = 10000
	rng := rand.New(rand.NewSource(42)) // used by this goroutine, then only by the drainer
	h := newHarness(t, Options{})
	h.onEvent = func(key types.NamespacedName, now time.Time) {
		h.s.Schedule(key, "store", NextSlot(key, testInterval, now, 0.1, rng.Float64))
	}
	for i := range n {
		k := testKey(i)
		h.s.Schedule(k, "store", NextSlot(k, testInterval, t0, 0.1, rng.Float64))
	}
	h.start()
	const secs = 2 * 60
	h.step(secs)

	counts := perSecond(h.snapshot(), secs)
	// The second interval, (60s, 120s], is steady state: every key fires once
	// per interval there, so its average is the designed rate N/interval.
	steady := 0
	for _, c := range counts[61:] {
		steady += c
	}
	mean := float64(steady) / 60
	maxC := slices.Max(counts)
	if want := float64(n) / 60; mean < 0.95*want || mean > 1.05*want {
		t.Fatalf("steady-state mean %.1f events/s, want ~%.1f", mean, want)
	}
	ratio := float64(maxC) / mean
	t.Logf("N=%d: max %d events/s, mean %.1f events/s, max/mean = %.3f", n, maxC, mean, ratio)
	if ratio > 1.5 {
		t.Fatalf("max/mean = %.3f > 1.5; counts per second: %v", ratio, counts)
	}

	// The naive alternative for contrast: a global ticker makes every key due at t0.
	naive := make([]received, n)
	for i := range naive {
		naive[i] = received{key: testKey(i), sec: 0}
	}
	if naiveMax := slices.Max(perSecond(naive, secs)); naiveMax != n {
		t.Fatalf("naive max = %d, want %d", naiveMax, n)
	} else {
		t.Logf("naive global ticker: %d events in one second, max/mean = %.1f", naiveMax, float64(naiveMax)/mean)
	}
}

// TestEachKeyOncePerInterval re-schedules every key after each event, as the
// reconciler does after a probe, and checks the per-key cadence.
func TestEachKeyOncePerInterval(t *testing.T) {
	const n = 10000
	half := int(testInterval / 2 / time.Second)
	iv := int(testInterval / time.Second)

	t.Run("no jitter: exactly 3 events in 3 intervals", func(t *testing.T) {
		h := newHarness(t, Options{})
		h.onEvent = func(key types.NamespacedName, now time.Time) {
			h.s.Schedule(key, "store", NextSlot(key, testInterval, now, 0, nil))
		}
		for i := range n {
			k := testKey(i)
			h.s.Schedule(k, "store", NextSlot(k, testInterval, t0, 0, nil))
		}
		h.start()
		// The first slot is in [t0+interval/2, t0+interval/2+interval), so
		// (t0, t0+interval/2+3*interval] spans 3 full slots of every key.
		h.step(half + 3*iv)
		got := byKey(h.snapshot())
		if len(got) != n {
			t.Fatalf("%d keys fired, want %d", len(got), n)
		}
		for k, secs := range got {
			if len(secs) != 3 {
				t.Fatalf("%v fired %d times at %v, want exactly 3", k, len(secs), secs)
			}
			for i := 1; i < len(secs); i++ {
				if d := secs[i] - secs[i-1]; d < half {
					t.Fatalf("%v fired twice within interval/2: %v", k, secs)
				}
			}
		}
	})

	t.Run("jitter 0.1: exactly 3 events in 3 slots", func(t *testing.T) {
		rng := rand.New(rand.NewSource(3))
		h := newHarness(t, Options{})
		h.onEvent = func(key types.NamespacedName, now time.Time) {
			h.s.Schedule(key, "store", NextSlot(key, testInterval, now, 0.1, rng.Float64))
		}
		for i := range n {
			k := testKey(i)
			h.s.Schedule(k, "store", NextSlot(k, testInterval, t0, 0.1, rng.Float64))
		}
		h.start()
		// With ±6s jitter, consecutive events are 48s..72s apart, so the
		// window [first, first+2.5 intervals) holds exactly 3 events. Every
		// first event is before t0+(30+6)+60+6s, so 102+150 seconds cover all
		// windows.
		h.step(half + 6 + iv + 6 + iv*5/2 + 1)
		got := byKey(h.snapshot())
		if len(got) != n {
			t.Fatalf("%d keys fired, want %d", len(got), n)
		}
		for k, secs := range got {
			inWindow := 0
			for _, s := range secs {
				if s < secs[0]+iv*5/2 {
					inWindow++
				}
			}
			if inWindow != 3 {
				t.Fatalf("%v fired %d times in its 3 slots (%v), want exactly 3", k, inWindow, secs)
			}
			for i := 1; i < len(secs); i++ {
				// Second-granular buckets: allow 1s either way.
				if d := secs[i] - secs[i-1]; d < half || d < iv-12-1 || d > iv+12+1 {
					t.Fatalf("%v: events %ds apart (%v), want %d±12s and >= %ds", k, d, secs, iv, half)
				}
			}
		}
	})
}

// TestRescheduleReplacesDueTime checks that Schedule replaces, never adds.
func TestRescheduleReplacesDueTime(t *testing.T) {
	h := newHarness(t, Options{})
	h.start()
	k := testKey(1)

	// Earlier: the loop, asleep until t0+10s, must be woken to fire at t0+5s.
	h.s.Schedule(k, "store", t0.Add(10*time.Second))
	h.settle()
	h.s.Schedule(k, "store", t0.Add(5*time.Second))
	h.settle()
	if due, ok := h.s.Due(k); !ok || !due.Equal(t0.Add(5*time.Second)) || h.s.Len() != 1 {
		t.Fatalf("Due = %v, %v; Len = %d; want t0+5s, true, 1", due, ok, h.s.Len())
	}
	h.step(15)
	if evs := h.snapshot(); len(evs) != 1 || evs[0].sec != 5 {
		t.Fatalf("events %v, want exactly one at second 5", evs)
	}
	if lag := h.lag(k); lag != 0 {
		t.Fatalf("lag %v, want 0", lag)
	}
	if h.s.Len() != 0 {
		t.Fatalf("Len = %d after firing, want 0", h.s.Len())
	}

	// Later: the old time (t0+20s) must not fire; the new one (t0+35s) must.
	h.s.Schedule(k, "store", t0.Add(20*time.Second))
	h.settle()
	h.s.Schedule(k, "store", t0.Add(35*time.Second))
	h.settle()
	h.step(19) // now t0+34s
	if evs := h.snapshot(); len(evs) != 1 {
		t.Fatalf("fired at the replaced time: %v", evs)
	}
	h.step(1)
	if evs := h.snapshot(); len(evs) != 2 || evs[1].sec != 35 {
		t.Fatalf("events %v, want a second one at second 35", evs)
	}
	h.step(30)
	if evs := h.snapshot(); len(evs) != 2 {
		t.Fatalf("extra events: %v", evs)
	}
}

// TestConcurrentScheduleOneEntryPerKey hammers Schedule from many goroutines
// (like reconcile workers) and checks each key still fires exactly once.
func TestConcurrentScheduleOneEntryPerKey(t *testing.T) {
	const keys, workers = 1000, 8
	h := newHarness(t, Options{})
	h.start()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for i := range keys {
				h.s.Schedule(testKey(i), "store", t0.Add(time.Duration(1+rng.Intn(10))*time.Second))
			}
		}()
	}
	wg.Wait()
	h.settle()
	if h.s.Len() != keys {
		t.Fatalf("Len = %d, want %d (one entry per key)", h.s.Len(), keys)
	}
	h.step(12)
	for k, secs := range byKey(h.snapshot()) {
		if len(secs) != 1 {
			t.Fatalf("%v fired %d times", k, len(secs))
		}
	}
	if n := len(h.snapshot()); n != keys {
		t.Fatalf("%d events, want %d", n, keys)
	}
}

// TestForget checks that forgotten keys never fire, including keys waiting
// for a budget token.
func TestForget(t *testing.T) {
	h := newHarness(t, Options{})
	h.s.SetBudget("slow", 1, 1)
	a, b, c := testKey(1), testKey(2), testKey(3)
	for _, k := range []types.NamespacedName{a, b, c} {
		h.s.Schedule(k, "store", t0.Add(5*time.Second))
	}
	d, e, f := testKey(4), testKey(5), testKey(6)
	for _, k := range []types.NamespacedName{d, e, f} {
		h.s.Schedule(k, "slow", t0)
	}
	h.start() // d fires at t0; e and f are delayed by the budget
	delayed := []types.NamespacedName{}
	for _, k := range []types.NamespacedName{d, e, f} {
		if due, ok := h.s.Due(k); ok && due.After(t0) {
			delayed = append(delayed, k)
		}
	}
	if len(delayed) != 2 {
		t.Fatalf("%d keys delayed by the budget, want 2", len(delayed))
	}
	h.s.Forget(a)
	h.s.Forget(delayed[0])
	h.s.Forget(testKey(99)) // unknown: no-op
	h.settle()
	if _, ok := h.s.Due(a); ok {
		t.Fatal("Due reports a forgotten key")
	}
	h.step(20)
	got := byKey(h.snapshot())
	if _, ok := got[a]; ok {
		t.Fatalf("forgotten key %v fired", a)
	}
	if _, ok := got[delayed[0]]; ok {
		t.Fatalf("forgotten delayed key %v fired", delayed[0])
	}
	if len(got) != 4 || h.s.Len() != 0 {
		t.Fatalf("fired %v, Len %d; want b, c and two slow keys, Len 0", got, h.s.Len())
	}
}

// TestLookupHandsOverTheDueTimeItFiredFor: a waiting key is not fired; once its
// event is sent Lookup says fired, with the due time it fired for, to every caller
// until the key is scheduled again or forgotten. A key held back by its store's
// budget is not fired while it waits for its token, though its due time has passed.
func TestLookupHandsOverTheDueTimeItFiredFor(t *testing.T) {
	h := newHarness(t, Options{})
	h.s.SetBudget("slow", 1, 1)
	h.start()
	k, held := testKey(1), testKey(2)

	if _, _, ok := h.s.Lookup(k); ok {
		t.Fatal("Lookup of a key never scheduled: ok")
	}
	h.s.Schedule(k, "store", t0.Add(5*time.Second))
	h.s.Schedule(testKey(3), "slow", t0) // takes the slow store's only token
	h.s.Schedule(held, "slow", t0)
	h.settle()
	if due, fired, ok := h.s.Lookup(k); !ok || fired || !due.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("before its time: Lookup = %v, %v, %v; want t0+5s, not fired", due, fired, ok)
	}
	if _, fired, _ := h.s.Lookup(held); fired {
		t.Fatal("a key waiting for its store's token reads fired")
	}
	h.step(5)
	for range 2 { // asked twice, answered the same
		if due, fired, ok := h.s.Lookup(k); !ok || !fired || !due.Equal(t0.Add(5*time.Second)) {
			t.Fatalf("after its event: Lookup = %v, %v, %v; want t0+5s, fired", due, fired, ok)
		}
	}
	if due, fired, ok := h.s.Lookup(held); !ok || !fired || !due.Equal(t0) {
		t.Fatalf("after its token: Lookup = %v, %v, %v; want t0 (the due time, not the token's), fired", due, fired, ok)
	}

	h.s.Schedule(k, "store", t0.Add(30*time.Second))
	h.settle()
	if due, fired, _ := h.s.Lookup(k); fired || !due.Equal(t0.Add(30*time.Second)) || h.s.Len() != 1 {
		t.Fatalf("scheduled again: Lookup = %v, %v, Len %d; want t0+30s, not fired, 1 waiting", due, fired, h.s.Len())
	}
	h.s.Forget(held)
	if _, _, ok := h.s.Lookup(held); ok {
		t.Fatal("a forgotten fired key is still held")
	}
	h.step(30)
	if got := byKey(h.snapshot())[k]; len(got) != 2 || got[1] != 30 {
		t.Fatalf("events of the key at seconds %v, want 5 and 30", got)
	}
}

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
