package probe

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// DefaultBufferSize is the event channel capacity used when Options.BufferSize <= 0.
const DefaultBufferSize = 1024

// Options configures a Scheduler.
type Options struct {
	// BufferSize of the event channel (default 1024). Sends never block Start's
	// loop forever: if the channel is full, wait (ctx-aware) — do not drop.
	BufferSize int
	// OnSend, if set, is called for each event sent with the lag (send time -
	// due time), for a metric. It runs on Start's goroutine without locks held,
	// so it may call back into the Scheduler, but it should be cheap.
	OnSend func(key types.NamespacedName, lag time.Duration)
}

// Scheduler is a manager.Runnable that emits one generic event per key when
// the key's due time is reached.
//
// It keeps one entry per key, waiting in a min-heap ordered by fire time, so
// memory and work are O(keys) regardless of how often the reconciler
// re-schedules, and a key can never be probed twice for one slot. When its
// event is sent the entry leaves the heap but stays, marked fired, until the
// key is scheduled again or forgotten: the work queue coalesces requests by
// key and cannot carry the due time, so the reconcile the event wakes reads it
// here (Lookup) instead of re-deriving it. The scheduler is the one holder of
// a key's due time. The reconciler schedules the next slot after the probe
// ran, so a slow or failing probe naturally pushes its own next slot back
// instead of piling up events.
//
// It must only run on the leader (NeedLeaderElection): two replicas emitting
// events would double the probe load the scheduler exists to flatten.
type Scheduler struct {
	clk    clock.WithTicker
	events chan event.TypedGenericEvent[client.Object]
	onSend func(types.NamespacedName, time.Duration)
	// wake (capacity 1, never blocks the sender) interrupts the loop's sleep
	// when the heap changed in a way the armed timer does not cover.
	wake chan struct{}

	mu     sync.Mutex
	h      entryHeap
	index  map[types.NamespacedName]*entry
	limits map[string]*rate.Limiter

	// Loop state, guarded by mu. parked is true while the loop sleeps with all
	// heap changes accounted for; armedAt is the fire time of its timer (only
	// meaningful if armed). parkGen counts parkings (used by tests to detect a
	// quiescent loop).
	parked  bool
	armed   bool
	armedAt time.Time
	parkGen uint64
	// inflight/abort identify an event whose send is blocked on a full channel,
	// so that Forget can still cancel it.
	inflight types.NamespacedName
	abort    chan struct{}
}

// entry is one key in the heap.
type entry struct {
	key   types.NamespacedName
	store string
	due   time.Time // when the caller wanted the event (lag is measured from here)
	at    time.Time // when it will fire: due, or later if the store budget delayed it
	// res is the token reserved for a budget-delayed entry; when the entry fires
	// it uses this token instead of asking the limiter again.
	res *rate.Reservation
	// fired: the event for due was sent (or is being sent); the entry is out of
	// the heap until the key is scheduled again.
	fired bool
	index int
}

var (
	_ manager.Runnable               = (*Scheduler)(nil)
	_ manager.LeaderElectionRunnable = (*Scheduler)(nil)
)

// NewScheduler returns a Scheduler driven by clk (use a fake clock in tests).
func NewScheduler(clk clock.WithTicker, opts Options) *Scheduler {
	size := opts.BufferSize
	if size <= 0 {
		size = DefaultBufferSize
	}
	return &Scheduler{
		clk:    clk,
		events: make(chan event.TypedGenericEvent[client.Object], size),
		onSend: opts.OnSend,
		wake:   make(chan struct{}, 1),
		index:  map[types.NamespacedName]*entry{},
		limits: map[string]*rate.Limiter{},
	}
}

// Schedule adds key, or replaces its due time (the heap holds one entry per
// key), and wakes the loop if the new time is earlier than what it sleeps for.
// Replacing an entry that was waiting for a budget token returns that token.
// Safe to call from any goroutine.
func (s *Scheduler) Schedule(key types.NamespacedName, store string, due time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.index[key]; ok {
		s.releaseLocked(e)
		e.store, e.due, e.at = store, due, due
		if e.fired {
			e.fired = false
			heap.Push(&s.h, e)
		} else {
			heap.Fix(&s.h, e.index)
		}
	} else {
		e = &entry{key: key, store: store, due: due, at: due}
		heap.Push(&s.h, e)
		s.index[key] = e
	}
	if !s.armed || due.Before(s.armedAt) {
		s.wakeLocked()
	}
}

// Forget removes key; no event is sent for it afterwards. If its event is
// currently blocked on a full channel the send is abandoned (best effort: an
// event already accepted by the channel cannot be recalled).
func (s *Scheduler) Forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.abort != nil && s.inflight == key {
		close(s.abort)
		s.abort = nil
	}
	e, ok := s.index[key]
	if !ok {
		return
	}
	delete(s.index, key)
	if e.fired {
		return // not in the heap
	}
	s.releaseLocked(e)
	wasHead := e.index == 0
	heap.Remove(&s.h, e.index)
	if wasHead {
		// Re-arm for the new head rather than waking up for nothing later.
		s.wakeLocked()
	}
}

// SetBudget sets a token bucket for store: at most perSecond events per
// second with bursts of burst (minimum 1). perSecond <= 0 removes the limit.
//
// Entries due beyond the budget are delayed, never dropped: each reserves the
// next free token and is re-queued at that token's time, so a backlog drains
// at exactly the budgeted rate (no burst when it clears) and in due order.
// Changing an existing budget keeps tokens already reserved; removing it
// releases delayed entries at once. The limiter is driven by the injected
// clock, never by time.Now, so fake clocks control it too.
func (s *Scheduler) SetBudget(store string, perSecond float64, burst int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.Now()
	if perSecond <= 0 {
		if _, ok := s.limits[store]; !ok {
			return
		}
		delete(s.limits, store)
		for _, e := range s.h {
			if e.store == store && e.res != nil {
				e.res, e.at = nil, e.due
				heap.Fix(&s.h, e.index)
			}
		}
		s.wakeLocked()
		return
	}
	if burst < 1 {
		burst = 1 // a zero burst would make every reservation fail
	}
	if lim, ok := s.limits[store]; ok {
		lim.SetLimitAt(now, rate.Limit(perSecond))
		lim.SetBurstAt(now, burst)
		return
	}
	s.limits[store] = rate.NewLimiter(rate.Limit(perSecond), burst)
}

// Source returns a source.Channel over the event channel that enqueues the
// event's object key. Use either Source or Events, not both: each event is
// received once.
func (s *Scheduler) Source() source.Source {
	return source.Channel[client.Object](s.events, &handler.TypedEnqueueRequestForObject[client.Object]{})
}

// Events returns the raw event channel (for tests and custom wiring).
func (s *Scheduler) Events() <-chan event.TypedGenericEvent[client.Object] {
	return s.events
}

// NeedLeaderElection is true: only the leader may emit probe events.
func (s *Scheduler) NeedLeaderElection() bool { return true }

// Len returns the number of keys waiting to fire (fired keys not scheduled
// again are not counted).
func (s *Scheduler) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.h)
}

// Due returns the time a waiting key will fire: its scheduled time, or the
// later time a budget token is reserved for. A fired key is not waiting.
func (s *Scheduler) Due(key types.NamespacedName) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.index[key]; ok && !e.fired {
		return e.at, true
	}
	return time.Time{}, false
}

// Lookup returns the due time key was last scheduled for and whether its event
// has been sent for it (fired: the probe is due now, and the budget allowed
// it); ok is false for a key the scheduler does not hold. A fired key keeps its
// answer until it is scheduled again or forgotten, however many reconciles ask.
func (s *Scheduler) Lookup(key types.NamespacedName) (due time.Time, fired, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.index[key]; ok {
		return e.due, e.fired, true
	}
	return time.Time{}, false, false
}

// Start emits events until ctx is done, then returns nil. The loop sleeps on
// a single clock timer for the earliest entry (no polling), is woken early by
// Schedule/Forget, and never holds the lock while blocked.
func (s *Scheduler) Start(ctx context.Context) error {
	for {
		if ctx.Err() != nil {
			return nil
		}
		s.mu.Lock()
		s.parked, s.armed = false, false
		now := s.clk.Now()
		if e := s.popDueLocked(now); e != nil {
			if !s.sendLocked(ctx, e, now) {
				return nil
			}
			continue
		}
		var timer clock.Timer
		var fire <-chan time.Time
		if len(s.h) > 0 {
			s.armed, s.armedAt = true, s.h[0].at
			timer = s.clk.NewTimer(s.h[0].at.Sub(now))
			fire = timer.C()
		}
		s.parked = true
		s.parkGen++
		s.mu.Unlock()

		select {
		case <-ctx.Done():
		case <-s.wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// popDueLocked removes and returns the earliest entry due at now that its
// store's budget allows to fire. Entries over budget reserve a token and are
// re-queued at the token's time instead. It returns nil if nothing can fire.
func (s *Scheduler) popDueLocked(now time.Time) *entry {
	for len(s.h) > 0 && !s.h[0].at.After(now) {
		e := s.h[0]
		if lim := s.limits[e.store]; lim != nil && e.res == nil {
			// ReserveN cannot fail: burst >= 1 and no max wait.
			r := lim.ReserveN(now, 1)
			if d := r.DelayFrom(now); d > 0 {
				e.res, e.at = r, now.Add(d)
				heap.Fix(&s.h, 0)
				continue
			}
		}
		heap.Pop(&s.h)
		e.res = nil // consumed
		// Marked before the send: a reconcile that runs meanwhile for another
		// reason probes (the slot is due) and schedules the next one, and the
		// event, when it lands, finds the key waiting again and probes nothing.
		e.fired = true
		return e
	}
	return nil
}

// sendLocked sends e's event and unlocks s.mu. The common case (channel has
// room) sends under the lock, so a concurrent Forget is strictly ordered
// with it. If the channel is full it waits without the lock, abandoning the
// send on Forget. It returns false if ctx was cancelled.
func (s *Scheduler) sendLocked(ctx context.Context, e *entry, now time.Time) bool {
	// The entry stays in the index (fired) and a concurrent Schedule may change it
	// once the lock is released: what the event and the metric need is copied now.
	key, due := e.key, e.due
	ev := event.TypedGenericEvent[client.Object]{Object: &metav1.PartialObjectMetadata{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
	}}
	select {
	case s.events <- ev:
		s.mu.Unlock()
		s.notify(key, due, now)
		return true
	default:
	}
	abort := make(chan struct{})
	s.inflight, s.abort = key, abort
	s.mu.Unlock()

	sent, done := false, false
	select {
	case s.events <- ev:
		sent = true
	case <-abort:
	case <-ctx.Done():
		done = true
	}
	s.mu.Lock()
	if s.abort == abort {
		s.abort = nil
	}
	s.mu.Unlock()
	if sent {
		s.notify(key, due, s.clk.Now())
	}
	return !done
}

func (s *Scheduler) notify(key types.NamespacedName, due, sentAt time.Time) {
	if s.onSend != nil {
		s.onSend(key, sentAt.Sub(due))
	}
}

// releaseLocked returns a reserved but unused budget token.
func (s *Scheduler) releaseLocked(e *entry) {
	if e.res != nil {
		e.res.CancelAt(s.clk.Now())
		e.res = nil
	}
}

// wakeLocked makes a parked loop re-evaluate the heap. A loop that is not
// parked re-reads the heap before sleeping anyway.
func (s *Scheduler) wakeLocked() {
	if !s.parked {
		return
	}
	s.parked, s.armed = false, false
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// quiescent reports whether the loop is parked with a timer that has not
// fired yet (or no timer), i.e. it will do nothing until the clock moves or
// the heap changes. gen changes each time the loop parks. Used by tests.
func (s *Scheduler) quiescent() (gen uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parkGen, s.parked && (!s.armed || s.armedAt.After(s.clk.Now()))
}

// entryHeap is a container/heap of entries ordered by fire time.
type entryHeap []*entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}
