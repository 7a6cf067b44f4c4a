package storagebucket

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// TestMoveLineIsFairAcrossNamespaces: a free slot goes to the waiting move of the
// namespace running the fewest moves, then to the one asked first; a move waits
// behind those ranked ahead of it that want the same store's slot, and for the
// operator's own bound; the reason it gives counts moves and names only its stores.
func TestMoveLineIsFairAcrossNamespaces(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC) }
	e := func(ns, name, from, to string, started int, running bool) inLine {
		return inLine{key: types.NamespacedName{Namespace: ns, Name: name}, from: from, to: to, startedAt: at(started), admitted: running}
	}
	line := []inLine{
		e("busy", "running", "src", "dst", 0, true),
		e("busy", "second", "src", "dst", 1, false), // asked first, its namespace runs one
		e("quiet", "first", "src", "other", 2, false),
	}
	bounds := map[string]int{"src": 2, "dst": 4, "other": 4}
	if why := blocked(line, line[2], bounds, 10); why != "" {
		t.Errorf("the quiet namespace's move waits (%s), want it to take the free slot of src", why)
	}
	why := blocked(line, line[1], bounds, 10)
	if !strings.Contains(why, `ObjectStore "src" runs 1 of the 2 moves`) || !strings.Contains(why, "number 2 in line") {
		t.Errorf("the busy namespace's second move: %q, want it to wait for src as number 2, behind the quiet namespace's", why)
	}
	if strings.Contains(why, "quiet") || strings.Contains(why, "busy") {
		t.Errorf("the reason %q names another claim", why)
	}

	// Equal namespaces: first asked, first served; the name breaks a tie.
	even := []inLine{e("a", "x", "src", "dst", 5, false), e("b", "y", "src", "dst", 3, false), e("c", "z", "src", "dst", 3, false)}
	one := map[string]int{"src": 1, "dst": 1}
	for i, wantFree := range []bool{false, true, false} {
		if got := blocked(even, even[i], one, 10) == ""; got != wantFree {
			t.Errorf("%s asked at %v: may start %v, want %v", even[i].key, even[i].startedAt, got, wantFree)
		}
	}

	// The other store's bound holds too, and a move ranked ahead keeps its slot of a
	// store even while it waits for its other store.
	full := []inLine{e("a", "running", "x", "dst", 0, true), e("b", "ahead", "src", "dst", 1, false), e("c", "me", "src", "free", 2, false)}
	if why := blocked(full, full[1], map[string]int{"src": 1, "dst": 1}, 10); !strings.Contains(why, `"dst"`) {
		t.Errorf("a move whose target runs its bound: %q, want it to wait for dst", why)
	}
	if why := blocked(full, full[2], map[string]int{"src": 1, "free": 1}, 10); !strings.Contains(why, `"src"`) {
		t.Errorf("a move behind one that waits for another store: %q, want it to wait for src", why)
	}

	// The operator's bound.
	busy := []inLine{e("a", "1", "p", "q", 0, true), e("b", "2", "r", "s", 0, true), e("c", "3", "t", "u", 0, false)}
	if why := blocked(busy, busy[2], map[string]int{"t": 4, "u": 4}, 2); !strings.Contains(why, "runs 2 of the 2 moves it allows at once (--max-concurrent-moves)") {
		t.Errorf("beyond the operator's bound: %q", why)
	}
}

// queueRig is a reconciler whose cache holds claims moving between ObjectStores "src"
// (maxConcurrent 1) and "dst", and the store registry that carries their budgets.
type queueRig struct {
	r      *Reconciler
	c      client.Client
	src    *bkv1.ObjectStore
	dst    *bkv1.ObjectStore
	claims map[string]*bkv1.StorageBucket
}

func newQueueRig(t *testing.T, names ...string) *queueRig {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = bkv1.AddToScheme(scheme)
	one := int32(1)
	src := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "src"}, Spec: bkv1.ObjectStoreSpec{RequestsPerSecond: 20, Burst: 20}}
	src.Spec.Guardrails.Moves.MaxConcurrent = &one
	dst := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "dst"}, Spec: bkv1.ObjectStoreSpec{RequestsPerSecond: 20, Burst: 20}}
	objs := []client.Object{src, dst}
	claims := map[string]*bkv1.StorageBucket{}
	for i, name := range names {
		started := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC))
		sb := &bkv1.StorageBucket{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns-" + name, Name: name},
			Spec:       bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: "dst"}},
			Status: bkv1.StorageBucketStatus{ObjectStore: "src", Move: &bkv1.MoveStatus{
				ID: "id-" + name, From: "src", To: "dst", Phase: bkv1.MoveQueued, Pass: 1, StartedAt: &started}},
		}
		claims[name] = sb
		objs = append(objs, sb)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&bkv1.StorageBucket{}).WithObjects(objs...).
		WithIndex(&bkv1.StorageBucket{}, reconcile.IndexStorageBucketMoving, reconcile.MovingStores).Build()
	return &queueRig{r: &Reconciler{Client: c, Stores: &stores.Registry{}}, c: c, src: src, dst: dst, claims: claims}
}

// admit runs the admission of a claim's move as its pass would, on a copy of the
// claim as the cache holds it.
func (g *queueRig) admit(t *testing.T, name string) (*bkv1.MoveStatus, bool) {
	t.Helper()
	sb := &bkv1.StorageBucket{}
	if err := g.c.Get(context.Background(), client.ObjectKeyFromObject(g.claims[name]), sb); err != nil {
		t.Fatal(err)
	}
	_, wait := g.r.admitMove(context.Background(), &bucketScope{sb: sb, store: g.src}, &moveTargetScope{store: g.dst}, sb.Status.Move)
	return sb.Status.Move, wait
}

// TestAdmissionCountsWhatTheCacheDoesNotShowYet: a move admitted by this process holds
// its slot before the cache shows it past Queued, also when its status write was
// lost (it is admitted again, not twice); an ended move frees its slot at once, the
// moves waiting on its stores are woken, and the operator gives up the budget share of
// the moves running on a store while they run and takes it back after.
func TestAdmissionCountsWhatTheCacheDoesNotShowYet(t *testing.T) {
	g := newQueueRig(t, "a", "b")
	ctx := context.Background()
	m, wait := g.admit(t, "a")
	if wait || m.Phase != bkv1.MovePlanning || m.Pass != 1 {
		t.Fatalf("the first move: wait %v, phase %s pass %d; want it admitted to Planning, pass 1", wait, m.Phase, m.Pass)
	}
	if share := g.r.Stores.MoveShare("src"); share != defaults.MoveShareOfBudget {
		t.Errorf("src's budget share of the moves while one of its one runs: %v, want %v", share, defaults.MoveShareOfBudget)
	}
	if share := g.r.Stores.MoveShare("dst"); share != defaults.MoveShareOfBudget/float64(defaults.MoveMaxConcurrentPerStore) {
		t.Errorf("dst's budget share of the moves while one of its %d runs: %v", defaults.MoveMaxConcurrentPerStore, share)
	}
	// Nothing was written: the cache shows both Queued.
	if m, wait := g.admit(t, "b"); !wait || m.Phase != bkv1.MoveQueued || !strings.Contains(m.Message, `ObjectStore "src" runs 1 of the 1 moves`) {
		t.Errorf("the second move while the first holds src's only slot: wait %v, phase %s, %q", wait, m.Phase, m.Message)
	}
	if _, wait := g.admit(t, "a"); wait {
		t.Error("the first move, whose admission was not written, waits behind itself")
	}

	// The first one ends: the second is woken and takes the slot.
	a := g.claims["a"].DeepCopy()
	a.Status.Move.Phase = bkv1.MoveDone
	g.r.moveEnded(ctx, client.ObjectKeyFromObject(a), a.Status.Move)
	select {
	case ev := <-g.r.queue.events():
		if ev.Object.GetName() != "b" {
			t.Errorf("woke %s, want b", ev.Object.GetName())
		}
	default:
		t.Error("the end of a move woke no move waiting on its store")
	}
	if share := g.r.Stores.MoveShare("src"); share != 0 {
		t.Errorf("src's budget share of the moves once none runs: %v, want 0", share)
	}
	if m, wait := g.admit(t, "b"); wait || m.Phase != bkv1.MovePlanning {
		t.Errorf("the second move once the first ended (the cache still shows it queued): wait %v, phase %s (%s)", wait, m.Phase, m.Message)
	}

	// The cache catches up with b running and a done; a claim gone takes its slot along.
	for name, phase := range map[string]bkv1.MovePhase{"a": bkv1.MoveDone, "b": bkv1.MovePlanning} {
		sb := g.claims[name].DeepCopy()
		if err := g.c.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
			t.Fatal(err)
		}
		sb.Status.Move.Phase = phase
		if err := g.c.Status().Update(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	if line, err := g.r.queue.lineLocked(ctx, g.c); err != nil || len(line) != 1 || !line[0].admitted || len(g.r.queue.decided) != 0 {
		t.Errorf("line %+v (%v), decisions %v: want b running, nothing left to lay over the cache", line, err, g.r.queue.decided)
	}
	if err := g.c.Delete(ctx, g.claims["b"]); err != nil {
		t.Fatal(err)
	}
	g.r.forgetMove(ctx, client.ObjectKeyFromObject(g.claims["b"]))
	if share := g.r.Stores.MoveShare("src"); share != 0 {
		t.Errorf("src's budget share of the moves once the claim moving was deleted: %v, want 0", share)
	}
}

// TestAResumedMoveStartsAtItsCopyPasses: a cancelled move asked again within its
// keep time queues again under its ID, and once admitted goes on at a copy pass after
// its last one, not at the plan; past the keep time, or towards another store, a new
// move starts.
func TestAResumedMoveStartsAtItsCopyPasses(t *testing.T) {
	g := newQueueRig(t, "a")
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	until := metav1.NewTime(now.Add(time.Minute))
	sb := g.claims["a"]
	sb.UID = "uid-a"
	sb.Status.Move = &bkv1.MoveStatus{ID: "uida-1", From: "src", To: "dst", Phase: bkv1.MoveAborted, Pass: 4,
		TargetBucket: "bucket", TargetKeptOn: "dst", TargetKeptUntil: &until}
	clock := clocktesting.NewFakeClock(now)
	r := &Reconciler{Client: g.c, Stores: g.r.Stores, Clock: clock, Recorder: events.NewFakeRecorder(10), Mover: &mover.InProcess{}}
	if !r.resumable(sb.Status.Move, "src", "dst") || r.resumable(sb.Status.Move, "src", "elsewhere") {
		t.Fatal("resumable: want the same move only")
	}
	m := r.startMove(sb, "src", "dst")
	if m.ID != "uida-1" || m.Phase != bkv1.MoveQueued || m.Pass != 4 || m.TargetKeptOn != "" || m.TargetBucket != "bucket" {
		t.Errorf("resumed: %+v; want ID uida-1 queued at pass 4, its target no longer only kept", m)
	}
	_, wait := r.admitMove(context.Background(), &bucketScope{sb: sb, store: g.src}, &moveTargetScope{store: g.dst}, m)
	if wait || m.Phase != bkv1.MoveCatchingUp || m.Pass != 5 {
		t.Errorf("admitted: wait %v, phase %s pass %d; want CatchingUp at pass 5", wait, m.Phase, m.Pass)
	}

	clock.Step(2 * time.Minute)
	sb.Status.Move = &bkv1.MoveStatus{ID: "uida-1", From: "src", To: "dst", Phase: bkv1.MoveAborted, Pass: 4, TargetKeptOn: "dst", TargetKeptUntil: &until}
	if r.resumable(sb.Status.Move, "src", "dst") {
		t.Error("resumable after the keep time")
	}
	if m := r.startMove(sb, "src", "dst"); m.ID != "uida-2" || m.Pass != 1 || m.Phase != bkv1.MoveQueued {
		t.Errorf("after the keep time: %+v, want a new move uida-2 at its plan", m)
	}
}
