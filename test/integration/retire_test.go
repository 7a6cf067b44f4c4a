package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestRetireAStoreIntoAnother retires a MinIO store holding six buckets of two
// namespaces (one bucket with objects) and a seventh of a third namespace into a
// SeaweedFS store whose allowedNamespaces admits only the first two, both stores
// running at most two moves at once:
//
//   - paused from the start, the six moves wait Queued (RetirementPaused) and the
//     store counts them queued, none moving; the seventh is skipped
//     (RetirementSkipped, MoveNotAllowed), named in the store's status, nothing
//     created for it on the successor, and it stays Ready on MinIO;
//   - meanwhile an eighth claim's tenant moves it to a third store with spec.move:
//     its own move wins (the retirement's held move of it cancelled) and runs though
//     the retirement is paused;
//   - unpaused, the tenants' manifests applied again as a GitOps tool does (server-side
//     apply) while the bucket with objects copies, and then paused: nothing changes,
//     that move finishes, and no other starts while paused (the store counts none moving, every
//     claim left Queued says RetirementPaused);
//   - unpaused again, every bucket moves: never more than two at once, every object
//     equal on the successor, every claim Ready, Current to kstatus, its
//     StoreRetired condition Retired, its spec and generation as the tenant left them;
//   - a new claim naming the retiring store is refused (ObjectStoreRetiring), nothing
//     created on MinIO;
//   - the store counts six moved and the one skipped, Retired=False until the skipped
//     claim is deleted, then True; the store's deletion then goes through, and the
//     claims naming it stay Ready on the successor, moving nothing;
//   - applying the manifests again changes nothing; a tenant naming the successor
//     without spec.move is admitted, and moves nothing.
func TestRetireAStoreIntoAnother(t *testing.T) {
	t.Parallel() // mostly waiting on paced moves: see the package doc in suite_test.go
	source := testenv.NewS3(t, testenv.MinIO)
	f := newFixture(t, source, func(s *bkv1.ObjectStore) {
		s.Spec.RequestsPerSecond, s.Spec.Burst = 20, 20 // the bucket with objects copies for a while
		s.Spec.Guardrails.Moves.MaxConcurrent = ptr32(2)
	})
	f.longer(15 * time.Minute)
	allowed := "test.bucketkeeper.io/retire-" + f.ns
	successor := f.storeOn(seaweed, func(s *bkv1.ObjectStore) {
		s.Spec.Guardrails.Moves.MaxConcurrent = ptr32(2)
		s.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{allowed: "yes"}}
	})
	f.waitNamedStoreCondition(successor, bkv1.ConditionReady, metav1.ConditionTrue, "")
	label := func(ns string) {
		obj := &corev1.Namespace{}
		must(t, k8s.Get(f.ctx, client.ObjectKey{Name: ns}, obj))
		f.update(k8s, obj, func() {
			if obj.Labels == nil {
				obj.Labels = map[string]string{}
			}
			obj.Labels[allowed] = "yes"
		})
	}
	other, refusedNS := f.tenantNamespace("sb-retire-b-").Name, f.tenantNamespace("sb-retire-c-").Name
	label(f.ns)
	label(other)

	purge := func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge }
	var claims []*bkv1.StorageBucket
	for _, ns := range []string{f.ns, other} {
		for i := range 3 {
			claims = append(claims, f.bucketIn(ns, fmt.Sprintf("b%d", i), purge))
		}
	}
	refused := f.bucketIn(refusedNS, "refused", purge)
	own := f.bucketIn(f.ns, "own", purge) // its tenant moves it elsewhere itself
	for i, sb := range append(claims, refused, own) {
		got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
		switch {
		case i < len(claims):
			claims[i] = got
		case sb == refused:
			refused = got
		default:
			own = got
		}
	}
	data := claims[0]
	seeded := f.seedObjects(f.admin, data.Status.BucketName, 120)
	specs, generations := map[string]bkv1.StorageBucketSpec{}, map[string]int64{}
	for _, sb := range append(claims, refused) {
		specs[sb.Namespace+"/"+sb.Name], generations[sb.Namespace+"/"+sb.Name] = *sb.Spec.DeepCopy(), sb.Generation
	}

	// Paused from the start: every move is asked for and held back.
	setRetire := func(paused bool) {
		store := &bkv1.ObjectStore{}
		must(t, k8s.Get(f.ctx, client.ObjectKey{Name: f.store}, store))
		f.update(k8s, store, func() { store.Spec.Retire = &bkv1.RetireSpec{Into: successor, Paused: paused} })
	}
	setRetire(true)
	st := f.waitRetirement(func(st *bkv1.RetirementStatus) bool { return st.Queued == 7 && st.Skipped == 1 })
	if st.Moving != 0 || st.Moved != 0 || len(st.SkippedClaims) != 1 || st.SkippedClaims[0] != (bkv1.RetirementSkip{Claim: refusedNS + "/refused", Reason: bkv1.ReasonMoveNotAllowed}) {
		t.Errorf("paused: %+v; want seven queued, none moving, the refused claim skipped for MoveNotAllowed", *st)
	}

	// A tenant's own move wins, the retirement paused or not, and no held move of the
	// store keeps it waiting.
	third := f.storeNamed(f.store+"-third", seaweed) // another ObjectStore, without the successor's allowedNamespaces
	f.waitNamedStoreCondition(third, bkv1.ConditionReady, metav1.ConditionTrue, "")
	f.moveTo(own, third, "")
	if got := f.waitMove(own, bkv1.MoveDone, 3*time.Minute); got.Status.ObjectStore != third || got.Status.Move.To != third ||
		got.Status.Retirement != nil || findCond(got, bkv1.ConditionStoreRetired) != nil {
		t.Errorf("the claim its tenant moved: on %q, move %+v, retirement %+v, %s; want it on %s, the retirement no longer concerning it",
			got.Status.ObjectStore, got.Status.Move, got.Status.Retirement, describe(got.Status.Conditions), third)
	}
	f.waitRetirement(func(st *bkv1.RetirementStatus) bool { return st.Queued == 6 && st.Moving == 0 })
	for _, sb := range claims {
		got := f.get(sb)
		if m := got.Status.Move; m == nil || m.Phase != bkv1.MoveQueued {
			t.Errorf("%s while paused: move %+v, want Queued", sb.Name, m)
		}
		f.wantStoreRetired(got, bkv1.ReasonRetirementPaused)
	}
	skipped := f.wantStoreRetired(f.get(refused), bkv1.ReasonRetirementSkipped)
	if skipped.Status.ObjectStore != f.store || skipped.Status.Retirement == nil || skipped.Status.Retirement.Skipped != bkv1.ReasonMoveNotAllowed {
		t.Errorf("the refused claim: on %q, retirement %+v", skipped.Status.ObjectStore, skipped.Status.Retirement)
	}
	tgtAdmin := adminOf(t, f.ctx, seaweed)
	if _, err := tgtAdmin.HeadBucket(f.ctx, refused.Status.BucketName); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("the refused claim's bucket on the successor: %v, want none", err)
	}

	// Unpaused, then paused again while the bucket with objects copies: it finishes,
	// no other move starts.
	watch := f.watchMovesIn(f.ns, other)
	setRetire(false)
	f.eventually(4*time.Minute, "the move of the bucket with objects admitted", func() error {
		if m := f.get(data).Status.Move; !m.Admitted() {
			return fmt.Errorf("move %+v", m)
		}
		return nil
	})
	// A GitOps tool applies the tenants' manifests again while the move runs: nothing
	// changes, and the move goes on.
	running := f.get(data).Status.Move.ID
	for _, sb := range claims {
		key := sb.Namespace + "/" + sb.Name
		if got := f.reapply(sb, specs[key]); got.Generation != generations[key] || got.Spec.ObjectStoreRef.Name != f.store {
			t.Errorf("%s: applying its manifest again during the retirement made generation %d (was %d), spec naming %q", key, got.Generation, generations[key], got.Spec.ObjectStoreRef.Name)
		}
	}
	setRetire(true)
	done := f.waitMove(data, bkv1.MoveDone, 5*time.Minute)
	if done.Status.ObjectStore != successor || done.Status.Move.ID != running {
		t.Errorf("the move running when the manifests were applied again and the retirement paused: on %q, move %s (was %s); want that move finished onto %s",
			done.Status.ObjectStore, done.Status.Move.ID, running, successor)
	}
	st = f.waitRetirement(func(st *bkv1.RetirementStatus) bool { return st.Moving == 0 && st.Moved >= 1 })
	for _, sb := range claims {
		got := f.get(sb)
		if m := got.Status.Move; m != nil && m.Phase == bkv1.MoveQueued {
			f.wantStoreRetired(got, bkv1.ReasonRetirementPaused)
		}
	}
	t.Logf("paused again: %d moved, %d held back", st.Moved, st.Queued)
	if st.Moved+st.Queued != 6 {
		t.Errorf("paused again: %+v; want every move done or held Queued", *st)
	}

	// A new claim naming the retiring store is refused, nothing created on it.
	late := f.bucketIn(f.ns, "late", purge)
	late = f.waitCondition(late, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonObjectStoreRetiring)
	if c := findCond(late, bkv1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("the late claim: %s; want Stalled", describe(late.Status.Conditions))
	}
	if late.Status.BucketName != "" || late.Status.CreateIntent != nil {
		t.Errorf("the late claim: bucket %q, create intent %+v; want none", late.Status.BucketName, late.Status.CreateIntent)
	}
	must(t, k8s.Delete(f.ctx, late))
	f.waitGone(late)

	// Unpaused: every bucket moves, at most two at once.
	setRetire(false)
	for _, sb := range claims {
		f.waitMove(sb, bkv1.MoveDone, 5*time.Minute)
	}
	if seen := watch.stop(); seen.mostRunning > 2 || seen.mostRunning == 0 {
		t.Errorf("moves seen running at once: at most %d, want 1 or 2", seen.mostRunning)
	}
	f.waitMovedOnce(data, tgtAdmin, seeded, "the retirement's move of "+data.Name)
	for _, sb := range claims {
		got := f.wantStoreRetired(f.waitCondition(sb, bkv1.ConditionStoreRetired, metav1.ConditionTrue, bkv1.ReasonRetired), bkv1.ReasonRetired)
		key := got.Namespace + "/" + got.Name
		if got.Status.ObjectStore != successor || got.Spec.ObjectStoreRef.Name != f.store || got.Generation != generations[key] {
			t.Errorf("%s: lives on %q, spec names %q, generation %d (was %d); want it on %s, its spec untouched", key, got.Status.ObjectStore, got.Spec.ObjectStoreRef.Name, got.Generation, generations[key], successor)
		}
		if _, err := tgtAdmin.HeadBucket(f.ctx, got.Status.BucketName); err != nil {
			t.Errorf("%s's bucket on the successor: %v", key, err)
		}
	}
	st = f.waitRetirement(func(st *bkv1.RetirementStatus) bool { return st.Moved == 6 })
	if st.Moving != 0 || st.Queued != 0 || st.Skipped != 1 || st.Remaining != 0 {
		t.Errorf("retired but for the refused claim: %+v", *st)
	}
	f.waitNamedStoreCondition(f.store, bkv1.ConditionRetired, metav1.ConditionFalse, bkv1.ReasonRetiring)
	if got := f.get(refused); got.Status.ObjectStore != f.store || !readyCurrent(got) {
		t.Errorf("the refused claim: on %q, %s; want it Ready on %s", got.Status.ObjectStore, describe(got.Status.Conditions), f.store)
	}

	// The skipped claim goes: no bucket is left, and the store may go.
	must(t, k8s.Delete(f.ctx, refused))
	f.waitGone(refused)
	f.waitNamedStoreCondition(f.store, bkv1.ConditionRetired, metav1.ConditionTrue, bkv1.ReasonRetired)
	must(t, k8s.Delete(f.ctx, &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}}))
	f.waitGone(&bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}})

	// Applying the tenants' manifests again changes nothing, the store they name gone.
	for _, sb := range claims {
		moveID := f.get(sb).Status.Move.ID
		got := f.reapply(sb, specs[sb.Namespace+"/"+sb.Name])
		if got.Generation != generations[got.Namespace+"/"+got.Name] {
			t.Errorf("%s: applying its manifest again made generation %d, want %d", got.Name, got.Generation, generations[got.Namespace+"/"+got.Name])
		}
		after := f.waitCondition(got, bkv1.ConditionStoreRetired, metav1.ConditionTrue, bkv1.ReasonRetired)
		if after.Status.ObjectStore != successor || after.Status.Move.ID != moveID || after.Status.Move.Phase != bkv1.MoveDone || !readyCurrent(after) {
			t.Errorf("%s once its store is gone: on %q, move %+v, %s", got.Name, after.Status.ObjectStore, after.Status.Move, describe(after.Status.Conditions))
		}
	}

	// A tenant names the successor, without spec.move: admitted, nothing moves.
	renamed := f.get(claims[1])
	moveID := renamed.Status.Move.ID
	f.update(k8s, renamed, func() { renamed.Spec.ObjectStoreRef.Name = successor })
	f.eventually(time.Minute, "the renamed claim reconciled", func() error {
		got := f.get(renamed)
		if got.Status.ObservedGeneration != got.Generation || findCond(got, bkv1.ConditionStoreRetired) != nil || got.Status.Retirement != nil {
			return fmt.Errorf("observed generation %d of %d, retirement %+v, %s", got.Status.ObservedGeneration, got.Generation, got.Status.Retirement, describe(got.Status.Conditions))
		}
		return nil
	})
	if got := f.get(renamed); got.Status.ObjectStore != successor || got.Status.Move.ID != moveID || got.Status.Move.Phase != bkv1.MoveDone || !readyCurrent(got) {
		t.Errorf("the claim naming the successor: on %q, move %+v, %s", got.Status.ObjectStore, got.Status.Move, describe(got.Status.Conditions))
	}
}

// reapply applies a claim's manifest again as a GitOps tool does: server-side apply of
// the spec its repository holds, under the tool's own field manager, forced. It
// declares what the claim already has, so nothing changes: not the generation, not
// the store the spec names, whatever the retirement did with the bucket.
func (f *fixture) reapply(sb *bkv1.StorageBucket, spec bkv1.StorageBucketSpec) *bkv1.StorageBucket {
	f.t.Helper()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	must(f.t, err)
	manifest := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": bkv1.GroupVersion.String(), "kind": "StorageBucket",
		"metadata": map[string]any{"namespace": sb.Namespace, "name": sb.Name},
		"spec":     content,
	}}
	must(f.t, k8s.Patch(f.ctx, manifest, client.Apply, client.FieldOwner("gitops"), client.ForceOwnership))
	return f.get(sb)
}

// waitRetirement waits until the fixture's store's status.retirement satisfies ok.
func (f *fixture) waitRetirement(ok func(*bkv1.RetirementStatus) bool) *bkv1.RetirementStatus {
	f.t.Helper()
	var st *bkv1.RetirementStatus
	f.eventually(3*time.Minute, "the retirement's counts", func() error {
		store := &bkv1.ObjectStore{}
		if err := k8s.Get(f.ctx, client.ObjectKey{Name: f.store}, store); err != nil {
			return err
		}
		if st = store.Status.Retirement; st == nil || !ok(st) {
			return fmt.Errorf("status.retirement %+v; conditions %s", st, describe(store.Status.Conditions))
		}
		return nil
	})
	return st
}

// wantStoreRetired checks a claim's StoreRetired reason, and that the retirement left
// it Ready, with no Reconciling or Stalled: Current to kstatus.
func (f *fixture) wantStoreRetired(sb *bkv1.StorageBucket, reason string) *bkv1.StorageBucket {
	f.t.Helper()
	if c := findCond(sb, bkv1.ConditionStoreRetired); c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason {
		f.t.Errorf("%s/%s: StoreRetired %+v, want %s", sb.Namespace, sb.Name, c, reason)
	}
	if !readyCurrent(sb) {
		f.t.Errorf("%s/%s: %s; want Ready, neither Reconciling nor Stalled", sb.Namespace, sb.Name, describe(sb.Status.Conditions))
	}
	return sb
}

// readyCurrent says whether a claim reads as Current to kstatus: Ready=True, and
// neither Reconciling nor Stalled True.
func readyCurrent(sb *bkv1.StorageBucket) bool {
	ready := findCond(sb, bkv1.ConditionReady)
	for _, typ := range []string{bkv1.ConditionReconciling, bkv1.ConditionStalled} {
		if c := findCond(sb, typ); c != nil && c.Status == metav1.ConditionTrue {
			return false
		}
	}
	return ready != nil && ready.Status == metav1.ConditionTrue
}

// watchMovesIn is watchMoves over several namespaces: the most moves seen running at
// once.
func (f *fixture) watchMovesIn(namespaces ...string) *moveWatch {
	w := &moveWatch{stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stopped:
				return
			case <-time.After(200 * time.Millisecond):
			}
			running := 0
			for _, ns := range namespaces {
				list := &bkv1.StorageBucketList{}
				if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
					continue
				}
				for _, sb := range list.Items {
					if sb.Status.Move.Admitted() {
						running++
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
