package storagebucket

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// Moves are bounded: a store runs at most guardrails.moves.maxConcurrent moves into
// or out of it at once (divided among the operator's shards), and this process at
// most MaxConcurrentMoves, whatever their stores. A move starts Queued and is
// admitted (Planning) once both its stores and the process have a slot for it and no
// move ranked ahead of it in line wants that slot: the line is fair across
// namespaces (a namespace running fewer moves goes first), then first come, first
// served. The moves running on a store share MoveShareOfBudget of the store's
// request budget, each an equal part (moverBucket), and the operator's own requests
// give up what they take (store.Registry.SetMoveShare), so the store's
// requestsPerSecond holds for all of them together.
//
// The line is read from the cache (IndexStorageBucketMoving), with what this
// process decided that the cache may not show yet laid over it: a move it admitted
// counts as running, and one it ended as gone, from the moment it decided so.

// moveQueue is what the admission of moves shares between reconciles.
type moveQueue struct {
	mu sync.Mutex
	// decided: the moves this process admitted or ended, by claim, until the cache
	// shows as much.
	decided map[types.NamespacedName]decision
	// shared: the stores whose budget this process's moves take a share of.
	shared map[string]bool
	wake   chan event.TypedGenericEvent[client.Object]
}

// decision is what this process decided of one asking of a move (attempt).
type decision struct {
	attempt  string
	from, to string
	ended    bool
}

// attempt names one asking of a move: its ID, and when it was asked (a cancelled
// move resumed keeps its ID).
func attempt(m *bkv1.MoveStatus) string {
	if m.StartedAt == nil {
		return m.ID
	}
	return m.ID + "@" + m.StartedAt.UTC().Format(time.RFC3339)
}

// inLine is one move of the line: running (admitted) or waiting.
type inLine struct {
	key       types.NamespacedName
	from, to  string
	startedAt time.Time
	admitted  bool
}

func (e inLine) touches(store string) bool { return e.from == store || e.to == store }

// moveBound is how many moves into or out of store this process runs at once: the
// store's guardrails.moves.maxConcurrent divided among the shards, at least one.
func (r *Reconciler) moveBound(store *bkv1.ObjectStore) int {
	n := defaults.MoveMaxConcurrentPerStore
	if p := store.Spec.Guardrails.Moves.MaxConcurrent; p != nil && *p > 0 {
		n = int(*p)
	}
	if shards := r.Stores.Shards; shards > 1 {
		n /= shards
	}
	return max(1, n)
}

// processBound is MaxConcurrentMoves, or its default.
func (r *Reconciler) processBound() int {
	if r.MaxConcurrentMoves > 0 {
		return r.MaxConcurrentMoves
	}
	return defaults.MaxConcurrentMoves
}

// admitMove lets a queued move start when its stores and this process have a slot
// for it, and records the share of the stores' budget it takes before any mover
// runs. wait says it stays queued; the step then says when to look again (an end
// of another move on its stores wakes it sooner).
func (r *Reconciler) admitMove(ctx context.Context, scope *bucketScope, t *moveTargetScope, m *bkv1.MoveStatus) (moveStep, bool) {
	key := client.ObjectKeyFromObject(scope.sb)
	bounds := map[string]int{scope.store.Name: r.moveBound(scope.store), t.store.Name: r.moveBound(t.store)}
	q := &r.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	line, err := q.lineLocked(ctx, r.Client)
	if err != nil {
		return moveWait(m, err), true
	}
	me := inLine{key: key, from: m.From, to: m.To, startedAt: m.StartedAt.Time}
	if d, ok := q.decided[key]; ok && d.attempt == attempt(m) && !d.ended {
		me.admitted = true // admitted before; its status write did not land
	}
	line = slices.DeleteFunc(line, func(e inLine) bool { return e.key == key })
	if !me.admitted {
		if why := blocked(line, me, bounds, r.processBound()); why != "" {
			m.Message = "waiting for a move slot: " + why
			return moveStep{requeue: defaults.MoveQueueRecheck}, true
		}
	}
	if q.decided == nil {
		q.decided = map[types.NamespacedName]decision{}
	}
	q.decided[key] = decision{attempt: attempt(m), from: m.From, to: m.To}
	me.admitted = true
	r.setMoveSharesLocked(ctx, append(line, me), m.From, m.To)
	if m.Pass < 2 {
		m.Phase, m.Pass, m.Message = bkv1.MovePlanning, 1, "listing the source"
	} else {
		// Resumed after a cancel: the copy passes find equal what the move verified.
		m.Phase, m.Pass, m.Message = bkv1.MoveCatchingUp, m.Pass+1, "resumed: copying what is not on the target yet"
	}
	return moveStep{requeue: time.Millisecond}, false
}

// holdMoveShares sets the share of the budget of a running move's stores that the
// moves take, on every look at a running move: after a restart, before its movers
// spend more.
func (r *Reconciler) holdMoveShares(ctx context.Context, m *bkv1.MoveStatus) {
	q := &r.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	if line, err := q.lineLocked(ctx, r.Client); err == nil {
		r.setMoveSharesLocked(ctx, line, m.From, m.To)
	}
}

// moveEnded is called once the status of a move that ended (Done, Aborted) is
// written, its movers stopped: its stores' slots go to the moves waiting for them,
// and the operator takes back the share of their budget it gave up.
func (r *Reconciler) moveEnded(ctx context.Context, key types.NamespacedName, m *bkv1.MoveStatus) {
	q := &r.queue
	q.mu.Lock()
	if q.decided == nil {
		q.decided = map[types.NamespacedName]decision{}
	}
	q.decided[key] = decision{attempt: attempt(m), from: m.From, to: m.To, ended: true}
	if line, err := q.lineLocked(ctx, r.Client); err == nil {
		r.setMoveSharesLocked(ctx, line, m.From, m.To)
	}
	q.mu.Unlock()
	r.wakeQueued(ctx, key, m.From, m.To)
}

// forgetMove drops what this process decided of a claim that is gone.
func (r *Reconciler) forgetMove(ctx context.Context, key types.NamespacedName) {
	q := &r.queue
	q.mu.Lock()
	d, ok := q.decided[key]
	delete(q.decided, key)
	if line, err := q.lineLocked(ctx, r.Client); err == nil {
		r.setMoveSharesLocked(ctx, line) // every store a share was taken of
	}
	q.mu.Unlock()
	if ok {
		r.wakeQueued(ctx, key, d.from, d.to)
	}
}

// lineLocked reads the unfinished moves from the cache, with this process's decisions
// laid over them; a waiting move its store refuses (Stalled), one a retirement holds
// back or skips (heldBack) or one whose claim is being deleted holds no place in line. Decisions the cache shows by now are dropped.
func (q *moveQueue) lineLocked(ctx context.Context, c client.Reader) ([]inLine, error) {
	list := &bkv1.StorageBucketList{}
	if err := c.List(ctx, list, client.MatchingFields{reconcile.IndexStorageBucketMoving: reconcile.MovingAll}); err != nil {
		return nil, err
	}
	var line []inLine
	seen := map[types.NamespacedName]bool{}
	for i := range list.Items {
		sb := &list.Items[i]
		m := sb.Status.Move
		if m.Terminal() {
			continue // the index lags the object it was read with
		}
		key := client.ObjectKeyFromObject(sb)
		seen[key] = true
		e := inLine{key: key, from: m.From, to: m.To, admitted: m.Admitted()}
		if m.StartedAt != nil {
			e.startedAt = m.StartedAt.Time
		}
		if d, ok := q.decided[key]; ok && d.attempt == attempt(m) {
			switch {
			case d.ended:
				continue // ended here; the cache has not seen it yet
			case e.admitted:
				delete(q.decided, key) // the cache shows it running
			default:
				e.admitted = true
			}
		}
		if !e.admitted && (reconcile.ConditionIsTrue(sb.Status.Conditions, bkv1.ConditionStalled) || heldBack(sb) || sb.DeletionTimestamp != nil) {
			continue
		}
		line = append(line, e)
	}
	for key, d := range q.decided {
		if seen[key] {
			continue
		}
		sb := &bkv1.StorageBucket{}
		err := c.Get(ctx, key, sb)
		switch {
		case apierrors.IsNotFound(err) || (err == nil && sb.Status.Move != nil && attempt(sb.Status.Move) == d.attempt) || d.ended:
			delete(q.decided, key) // gone, or ended as the cache shows
		case err != nil:
			return nil, err
		default: // admitted here, the cache still shows it before that
			line = append(line, inLine{key: key, from: d.from, to: d.to, admitted: true})
		}
	}
	return line, nil
}

// blocked says why me may not start now ("" when it may): one of its stores, or the
// process, runs as many moves as it may, or would with the moves ranked ahead of me
// that want the same slot.
func blocked(line []inLine, me inLine, bounds map[string]int, processBound int) string {
	ahead := aheadOf(line, me)
	running := 0
	for _, e := range line {
		if e.admitted {
			running++
		}
	}
	for _, store := range []string{me.from, me.to} {
		onStore, before := 0, 0
		for _, e := range line {
			if e.admitted && e.touches(store) {
				onStore++
			}
		}
		for _, e := range ahead {
			if e.touches(store) {
				before++
			}
		}
		if onStore+before >= bounds[store] {
			return fmt.Sprintf("ObjectStore %q runs %d of the %d moves it allows at once (guardrails.moves.maxConcurrent); this move is number %d in line", store, onStore, bounds[store], before+1)
		}
	}
	if running+len(ahead) >= processBound {
		return fmt.Sprintf("the operator runs %d of the %d moves it allows at once (--max-concurrent-moves); this move is number %d in line", running, processBound, len(ahead)+1)
	}
	return ""
}

// aheadOf is the waiting moves ranked before me: those of namespaces running fewer
// moves first, then the earlier asked, then by namespace and name.
func aheadOf(line []inLine, me inLine) []inLine {
	runningIn := map[string]int{}
	for _, e := range line {
		if e.admitted {
			runningIn[e.key.Namespace]++
		}
	}
	rank := func(a, b inLine) int {
		return cmp.Or(
			cmp.Compare(runningIn[a.key.Namespace], runningIn[b.key.Namespace]),
			a.startedAt.Compare(b.startedAt),
			cmp.Compare(a.key.String(), b.key.String()))
	}
	var ahead []inLine
	for _, e := range line {
		if !e.admitted && rank(e, me) < 0 {
			ahead = append(ahead, e)
		}
	}
	return ahead
}

// setMoveSharesLocked gives the running moves of each named store, and of every store
// whose budget they took a share of before, their share of its budget, taken from the
// operator's own (see SetMoveShare): MoveShareOfBudget times the running moves over
// the store's bound, at most MoveShareOfBudget.
func (r *Reconciler) setMoveSharesLocked(ctx context.Context, line []inLine, stores ...string) {
	q := &r.queue
	if q.shared == nil {
		q.shared = map[string]bool{}
	}
	for name := range q.shared {
		if !slices.Contains(stores, name) {
			stores = append(stores, name)
		}
	}
	for _, name := range stores {
		running := 0
		for _, e := range line {
			if e.admitted && e.touches(name) {
				running++
			}
		}
		store := &bkv1.ObjectStore{}
		if err := r.Get(ctx, types.NamespacedName{Name: name}, store); err != nil {
			if apierrors.IsNotFound(err) {
				delete(q.shared, name) // a store gone has no budget to share
			}
			continue
		}
		bound := r.moveBound(store)
		r.Stores.SetMoveShare(name, defaults.MoveShareOfBudget*float64(min(running, bound))/float64(bound))
		if running > 0 {
			q.shared[name] = true
		} else {
			delete(q.shared, name)
		}
	}
}

// wakeQueued asks for a pass of every move waiting for a slot of the stores but the
// one of ended, whose slot they may take.
func (r *Reconciler) wakeQueued(ctx context.Context, ended types.NamespacedName, stores ...string) {
	for _, store := range stores {
		list := &bkv1.StorageBucketList{}
		if err := r.List(ctx, list, client.MatchingFields{reconcile.IndexStorageBucketMoving: store}); err != nil {
			continue // each looks again after MoveQueueRecheck
		}
		for _, sb := range list.Items {
			if sb.Status.Move != nil && sb.Status.Move.Phase == bkv1.MoveQueued && client.ObjectKeyFromObject(&sb) != ended {
				select {
				case r.queue.events() <- event.TypedGenericEvent[client.Object]{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: sb.Namespace, Name: sb.Name}}}:
				default: // full: it looks again after MoveQueueRecheck
				}
			}
		}
	}
}

// events is the channel of wakeQueued's events.
func (q *moveQueue) events() chan event.TypedGenericEvent[client.Object] {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.wake == nil {
		q.wake = make(chan event.TypedGenericEvent[client.Object], 1024)
	}
	return q.wake
}

// MoveWakeUps is the source of the passes wakeQueued asks for.
func (r *Reconciler) moveWakeUps() source.Source {
	return source.Channel(r.queue.events(), &handler.TypedEnqueueRequestForObject[client.Object]{})
}
