package probe

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// t0 is an arbitrary, deliberately unaligned start time for fake clocks.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 123456789, time.UTC)

// received is one event as seen by the drainer.
type received struct {
	key types.NamespacedName
	sec int // whole fake seconds since t0 when it was received
}

// harness runs a Scheduler on a fake clock with a concurrent drainer.
//
// Determinism comes from settle: the clock is only stepped once the loop is
// parked on a timer that has not fired, every sent event has been received
// and handled (including any re-Schedule by onEvent), and the loop has not
// parked again in between. Events received between two steps are therefore
// attributed to the right fake second without any real-time sleeps.
type harness struct {
	t  *testing.T
	fc *clocktesting.FakeClock
	s  *Scheduler
	// onEvent, if set, runs on the drainer goroutine for each event, before it
	// is counted as received (so re-Schedules are covered by settle).
	onEvent func(key types.NamespacedName, now time.Time)

	sent, recv atomic.Int64

	mu     sync.Mutex
	events []received
	lags   map[types.NamespacedName]time.Duration // last lag per key
}

func newHarness(t *testing.T, opts Options) *harness {
	h := &harness{t: t, fc: clocktesting.NewFakeClock(t0), lags: map[types.NamespacedName]time.Duration{}}
	opts.OnSend = func(key types.NamespacedName, lag time.Duration) {
		h.mu.Lock()
		h.lags[key] = lag
		h.mu.Unlock()
		h.sent.Add(1)
	}
	h.s = NewScheduler(h.fc, opts)
	return h
}

// start runs the loop and the drainer until the test ends.
func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	loopDone, drainDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(loopDone)
		if err := h.s.Start(ctx); err != nil {
			h.t.Errorf("Start returned %v", err)
		}
	}()
	go func() {
		defer close(drainDone)
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-h.s.Events():
				obj, ok := ev.Object.(*metav1.PartialObjectMetadata)
				if !ok {
					h.t.Errorf("event object is %T, want *PartialObjectMetadata", ev.Object)
					h.recv.Add(1)
					continue
				}
				key := types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}
				now := h.fc.Now()
				if h.onEvent != nil {
					h.onEvent(key, now)
				}
				h.mu.Lock()
				h.events = append(h.events, received{key: key, sec: int(now.Sub(t0) / time.Second)})
				h.mu.Unlock()
				h.recv.Add(1)
			}
		}
	}()
	h.t.Cleanup(func() {
		cancel()
		<-loopDone
		<-drainDone
	})
	h.settle()
}

// settle waits until the scheduler and drainer are quiescent (see harness).
func (h *harness) settle() {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		g1, ok1 := h.s.quiescent()
		if ok1 && h.recv.Load() == h.sent.Load() && len(h.s.events) == 0 &&
			(h.s.Len() == 0 || h.fc.HasWaiters()) { // parked on the fake timer
			if g2, ok2 := h.s.quiescent(); ok2 && g1 == g2 {
				return
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("scheduler did not settle: sent=%d recv=%d len=%d", h.sent.Load(), h.recv.Load(), h.s.Len())
		}
		time.Sleep(20 * time.Microsecond) // goroutine hand-off only
	}
}

// step advances the fake clock one second at a time, settling after each.
func (h *harness) step(seconds int) {
	h.t.Helper()
	for range seconds {
		h.fc.Step(time.Second)
		h.settle()
	}
}

// snapshot returns the events received so far.
func (h *harness) snapshot() []received {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]received(nil), h.events...)
}

func (h *harness) lag(key types.NamespacedName) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lags[key]
}

// perSecond counts events by the fake second they were received in.
func perSecond(evs []received, seconds int) []int {
	counts := make([]int, seconds+1)
	for _, e := range evs {
		if e.sec >= 0 && e.sec <= seconds {
			counts[e.sec]++
		}
	}
	return counts
}

// byKey returns, for each key, the fake seconds it was received at.
func byKey(evs []received) map[types.NamespacedName][]int {
	m := map[types.NamespacedName][]int{}
	for _, e := range evs {
		m[e.key] = append(m[e.key], e.sec)
	}
	return m
}
