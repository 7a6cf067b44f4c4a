package integration_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestPacedMovesShareTheStoresBudget moves four buckets out of one SeaweedFS store
// whose guardrails.moves.maxConcurrent is 3, every request to it counted at a proxy in
// front of it: three moves run, the fourth waits Queued (Reconciling, saying why)
// until one of them ended, never more than three run; a quiet tenant's new claim on
// the store becomes Ready meanwhile; all four end Done with every object; and the
// store's requestsPerSecond holds (within 10 %, plus its burst) over every 20 s
// window, for the operator and every mover together.
func TestPacedMovesShareTheStoresBudget(t *testing.T) {
	t.Parallel() // mostly waiting on the paced copies: see the package doc in suite_test.go
	const perSecond, burst, window = 20, 20, 20 * time.Second
	proxy, err := testenv.StartCountingProxy(seaweed.Endpoint, seaweed.AccessKeyID)
	must(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) {
		s.Spec.Endpoint = proxy.Endpoint
		s.Spec.RequestsPerSecond, s.Spec.Burst = perSecond, burst
		s.Spec.Guardrails.Moves.MaxConcurrent = ptr32(3)
	})
	f.longer(20 * time.Minute) // four paced moves, one after three
	target := f.storeOn(versity, func(s *bkv1.ObjectStore) { s.Spec.Guardrails.Moves.MaxConcurrent = ptr32(4) })
	f.waitNamedStoreCondition(target, bkv1.ConditionReady, metav1.ConditionTrue, "")
	names := []string{"m1", "m2", "m3", "m4"}
	claims := map[string]*bkv1.StorageBucket{}
	seeded := map[string]map[string][32]byte{}
	for _, name := range names {
		claims[name] = f.bucket(name)
	}
	for _, name := range names {
		sb := f.waitCondition(claims[name], bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
		claims[name] = sb
		seeded[name] = f.seedObjects(f.admin, sb.Status.BucketName, 200)
	}
	watch := f.watchMoves(3)

	for _, name := range names[:3] {
		f.moveTo(claims[name], target, "")
		f.waitAdmitted(claims[name])
	}
	f.moveTo(claims["m4"], target, "")
	queued := f.waitMove(claims["m4"], bkv1.MoveQueued, time.Minute)
	c := findCond(queued, bkv1.ConditionReconciling)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != bkv1.ReasonMoving ||
		!strings.Contains(c.Message, "waiting for a move slot") || !strings.Contains(c.Message, fmt.Sprintf("ObjectStore %q runs 3 of the 3 moves", f.store)) {
		t.Errorf("the fourth move while three run: Reconciling %+v; want Moving, waiting for a slot of %s", c, f.store)
	}
	if col := f.table("storagebuckets")["m4"]["Move"]; col != string(bkv1.MoveQueued) {
		t.Errorf("kubectl get's Move column of the fourth move: %q, want Queued", col)
	}

	// A quiet tenant's new claim on the store converges while the moves copy: the
	// moves take half of the store's budget, not all of it.
	quietNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sb-quiet-"}}
	must(t, k8s.Create(f.ctx, quietNS))
	quiet := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: quietNS.Name, Name: "quiet"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, DeletionPolicy: bkv1.DeletionPolicyDelete}}
	must(t, k8s.Create(f.ctx, quiet))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), quiet) })
	f.waitCondition(quiet, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	if m := f.get(claims["m4"]).Status.Move; m.Phase != bkv1.MoveQueued {
		t.Errorf("the quiet claim was Ready only once the fourth move was %s", m.Phase)
	}

	tgtAdmin := adminOf(t, f.ctx, versity)
	for _, name := range names {
		done := f.waitMove(claims[name], bkv1.MoveDone, 10*time.Minute)
		f.waitMovedOnce(done, tgtAdmin, seeded[name], "the move of "+name)
	}
	seen := watch.stop()
	if seen.mostRunning != 3 || !seen.lastAdmittedAfterAnEnd {
		t.Errorf("moves seen running at once: at most %d (want 3); the fourth admitted only after one ended: %v", seen.mostRunning, seen.lastAdmittedAfterAnEnd)
	}
	most, from := proxy.MaxRequestsIn(window)
	bound := int(1.1*perSecond*window.Seconds()) + burst
	t.Logf("%d requests reached the store; at most %d in %s (from %s), bound %d", proxy.Requests(), most, window, from.Format(time.TimeOnly), bound)
	if most > bound {
		t.Errorf("%d requests reached the store within %s, more than its budget allows (%d/s, burst %d: %d)", most, window, perSecond, burst, bound)
	}
}

// TestPacedMoveSlotGoesToTheWaitingNamespace: of two moves waiting for a store's slot,
// the one of a namespace that runs no move gets it before the one of a namespace
// already running one, though that one asked first.
func TestPacedMoveSlotGoesToTheWaitingNamespace(t *testing.T) {
	t.Parallel() // mostly waiting on the paced copies: see the package doc in suite_test.go
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) {
		s.Spec.RequestsPerSecond, s.Spec.Burst = 20, 20
		s.Spec.Guardrails.Moves.MaxConcurrent = ptr32(2)
	})
	f.longer(15 * time.Minute) // paced moves, one after another
	target := f.storeOn(versity, func(s *bkv1.ObjectStore) { s.Spec.Guardrails.Moves.MaxConcurrent = ptr32(4) })
	f.waitNamedStoreCondition(target, bkv1.ConditionReady, metav1.ConditionTrue, "")
	other := func() string {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sb-fair-"}}
		must(t, k8s.Create(f.ctx, ns))
		return ns.Name
	}
	claim := func(ns, name string, objects int) *bkv1.StorageBucket {
		sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, DeletionPolicy: bkv1.DeletionPolicyDelete}}
		must(t, k8s.Create(f.ctx, sb))
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), sb) })
		sb = f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
		f.seedObjects(f.admin, sb.Status.BucketName, objects)
		return sb
	}
	// busy runs a long move and asks for a second; another namespace runs one that is
	// cancelled once a third namespace waits too.
	running, second := claim(f.ns, "running", 300), claim(f.ns, "second", 5)
	cancelled, waiting := claim(other(), "cancelled", 300), claim(other(), "waiting", 5)
	for _, sb := range []*bkv1.StorageBucket{running, cancelled} {
		f.moveTo(sb, target, "")
		f.waitAdmitted(sb)
	}
	for _, sb := range []*bkv1.StorageBucket{second, waiting} { // second asks first
		f.moveTo(sb, target, "")
		f.waitMove(sb, bkv1.MoveQueued, time.Minute)
	}
	f.update(k8s, cancelled, func() { cancelled.Spec.ObjectStoreRef.Name = f.store })
	f.eventually(2*time.Minute, "a waiting move admitted", func() error {
		s, w := f.get(second).Status.Move, f.get(waiting).Status.Move
		switch {
		case s.Admitted() || s.Terminal():
			return nil
		case w.Admitted() || w.Terminal():
			return nil
		}
		return fmt.Errorf("second %s, waiting %s", s.Phase, w.Phase)
	})
	if s, w, r := f.get(second).Status.Move, f.get(waiting).Status.Move, f.get(running).Status.Move; s.Phase != bkv1.MoveQueued || w.Phase == bkv1.MoveQueued || !r.Admitted() {
		t.Errorf("once a slot was free: the busy namespace's second move %s, the other namespace's %s, the busy one's first %s; "+
			"want the other namespace's admitted while the busy one's first runs and its second waits", s.Phase, w.Phase, r.Phase)
	}
	for _, sb := range []*bkv1.StorageBucket{running, waiting, second} {
		f.waitMove(sb, bkv1.MoveDone, 8*time.Minute)
	}
}

// TestPacedCancelledMoveResumes cancels a move mid-copy and asks for it again within
// the keep time: the same move resumes, the objects it had copied are not copied
// again (the operator's object bytes written to the target, counted at a proxy in
// front of it, stay within 1.2 times the bucket's), and every object is on the target.
func TestPacedCancelledMoveResumes(t *testing.T) {
	t.Parallel() // mostly waiting on the paced copy: see the package doc in suite_test.go
	proxy, err := testenv.StartCountingProxy(rgw.Endpoint, rgw.AccessKeyID)
	must(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) { s.Spec.RequestsPerSecond, s.Spec.Burst = 10, 10 })
	f.longer(10 * time.Minute) // a paced move, twice
	target := f.storeOn(rgw, func(s *bkv1.ObjectStore) { s.Spec.Endpoint = proxy.Endpoint })
	f.waitNamedStoreCondition(target, bkv1.ConditionReady, metav1.ConditionTrue, "")
	sb := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	seeded := f.seedObjects(f.admin, sb.Status.BucketName, 150)
	var size int64
	for i := range 150 {
		size += int64((i % 7) * 1500)
	}

	f.moveTo(sb, target, "")
	f.eventually(2*time.Minute, "a third of the objects copied", func() error {
		if m := f.get(sb).Status.Move; m == nil || m.CopiedObjects < 50 {
			return fmt.Errorf("move %+v", m)
		}
		return nil
	})
	f.update(k8s, sb, func() { sb.Spec.ObjectStoreRef.Name = f.store })
	aborted := f.waitMove(sb, bkv1.MoveAborted, 2*time.Minute)
	if m := aborted.Status.Move; m.TargetKeptOn != target || m.TargetKeptUntil == nil {
		t.Errorf("the cancelled move keeps its target on %q until %v; want it kept on %s", m.TargetKeptOn, m.TargetKeptUntil, target)
	}
	if policy, err := f.admin.GetBucketPolicy(f.ctx, sb.Status.BucketName); err != nil || policy != "" {
		t.Errorf("source policy after the cancel: %q (%v), want none", policy, err)
	}
	before := proxy.Written()

	f.moveTo(sb, target, "")
	done := f.waitMove(sb, bkv1.MoveDone, 4*time.Minute)
	if done.Status.Move.ID != aborted.Status.Move.ID {
		t.Errorf("asked again: move %s, want the cancelled move %s resumed", done.Status.Move.ID, aborted.Status.Move.ID)
	}
	f.waitMovedOnce(done, adminOf(t, f.ctx, rgw), seeded, "the resumed move")
	written := proxy.Written()
	t.Logf("the bucket holds %d bytes; %d were written to the target before the cancel, %d in all", size, before, written)
	if float64(written) > 1.2*float64(size) {
		t.Errorf("%d bytes written to the target for a bucket of %d: the resumed move copied again what it had copied", written, size)
	}
}

// moveWatch follows the moves of the fixture's namespace, each look one consistent
// List: how many ran at once, and whether a move admitted after the first bound-many
// was admitted only once another had ended.
type moveWatch struct {
	stopped chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	seen    movesSeen
}

type movesSeen struct {
	mostRunning            int
	lastAdmittedAfterAnEnd bool
}

func (f *fixture) watchMoves(bound int) *moveWatch {
	w := &moveWatch{stopped: make(chan struct{}), done: make(chan struct{})}
	w.seen.lastAdmittedAfterAnEnd = true
	go func() {
		defer close(w.done)
		admitted := map[string]bool{}
		for {
			select {
			case <-w.stopped:
				return
			case <-time.After(200 * time.Millisecond):
			}
			list := &bkv1.StorageBucketList{}
			if err := k8s.List(f.ctx, list, client.InNamespace(f.ns)); err != nil {
				continue
			}
			running, ended := 0, 0
			for _, sb := range list.Items {
				m := sb.Status.Move
				switch {
				case m.Admitted():
					running++
				case m != nil && m.Phase == bkv1.MoveDone:
					ended++
				}
				if (m.Admitted() || m.Terminal() && m != nil) && !admitted[sb.Name] {
					admitted[sb.Name] = true
					if len(admitted) > bound && ended == 0 {
						w.mu.Lock()
						w.seen.lastAdmittedAfterAnEnd = false
						w.mu.Unlock()
					}
				}
			}
			w.mu.Lock()
			w.seen.mostRunning = max(w.seen.mostRunning, running)
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *moveWatch) stop() movesSeen {
	close(w.stopped)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// waitAdmitted waits until the claim's move holds its slots: past Queued.
func (f *fixture) waitAdmitted(sb *bkv1.StorageBucket) *bkv1.StorageBucket {
	f.t.Helper()
	got := &bkv1.StorageBucket{}
	f.eventually(time.Minute, "the move of "+sb.Name+" admitted", func() error {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		if m := got.Status.Move; !m.Admitted() {
			return fmt.Errorf("move %+v; conditions: %s", m, describe(got.Status.Conditions))
		}
		return nil
	})
	return got
}
