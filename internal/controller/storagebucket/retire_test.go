package storagebucket

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// retiringStores is a reconciler whose cache holds the ObjectStores of stores: each
// "name" or "name>successor" (retiring), with "!" after the successor for a paused
// retirement and "*" for one that copies every version.
func retiringStores(t *testing.T, stores ...string) *Reconciler {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = bkv1.AddToScheme(scheme)
	var objs []client.Object
	for _, s := range stores {
		name, into, retires := strings.Cut(s, ">")
		store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if retires {
			r := &bkv1.RetireSpec{Into: strings.TrimRight(into, "!*"), Paused: strings.Contains(into, "!"), Versions: bkv1.MoveVersionsCurrent}
			if strings.Contains(into, "*") {
				r.Versions = bkv1.MoveVersionsAll
			}
			store.Spec.Retire = r
		}
		objs = append(objs, store)
	}
	return &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()}
}

// claimOn is a claim whose spec names named and whose bucket lives on home ("" for a
// claim not provisioned yet), with the retirement record from (none for "").
func claimOn(named, home, retiredFrom string) *bkv1.StorageBucket {
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sb", Generation: 3},
		Spec:   bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: named}},
		Status: bkv1.StorageBucketStatus{ObjectStore: home}}
	if retiredFrom != "" {
		sb.Status.Retirement = &bkv1.ClaimRetirement{From: retiredFrom, Into: "ceph"}
	}
	return sb
}

// TestDestinationFollowsTheRetirement: where a claim's bucket should live is the
// store its spec names, or that store's successor while it retires (and the
// successor's, where that retires too), paused or copying every version if any
// retirement on the way says so; a bucket the retirement took away stays where it went
// once the store its spec names retires no more or is gone, and goes on where that
// store retires too; the spec decides again once it names another store; stores
// retiring into one another move nothing.
func TestDestinationFollowsTheRetirement(t *testing.T) {
	r := retiringStores(t, "minio>ceph", "ceph", "old>mid!*", "mid>new", "new", "back", "x>y", "y>x", "moved>elsewhere")
	cases := []struct {
		name        string
		sb          *bkv1.StorageBucket
		want        string
		retiredFrom string
		paused, all bool
		refused     bool
	}{
		{"a store that does not retire", claimOn("ceph", "ceph", ""), "ceph", "", false, false, false},
		{"a claim on a retiring store", claimOn("minio", "minio", ""), "ceph", "minio", false, false, false},
		{"a new claim naming a retiring store", claimOn("minio", "", ""), "ceph", "minio", false, false, false},
		{"the bucket moved, the spec still names the retired store", claimOn("minio", "ceph", "minio"), "ceph", "minio", false, false, false},
		{"a chain of retirements, the first paused and copying every version", claimOn("old", "old", ""), "new", "old", true, true, false},
		{"the retired store is gone", claimOn("gone", "ceph", "gone"), "ceph", "gone", false, false, false},
		{"the retired store retires no more", claimOn("back", "ceph", "back"), "ceph", "back", false, false, false},
		{"the retired store retires no more, the move had not switched", claimOn("back", "back", "back"), "back", "", false, false, false},
		{"where the bucket went retires too", claimOn("gone", "mid", "gone"), "new", "gone", false, false, false},
		{"the tenant named the successor", claimOn("ceph", "ceph", "minio"), "ceph", "", false, false, false},
		{"the tenant moves elsewhere with spec.move", claimOn("back", "minio", "minio"), "back", "", false, false, false},
		{"stores retiring into one another", claimOn("x", "x", ""), "x", "x", false, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := r.destinationOf(context.Background(), tc.sb)
			if err != nil {
				t.Fatal(err)
			}
			from := ""
			if d.retirement != nil {
				from = d.retirement.From
				if d.retirement.Into != d.store {
					t.Errorf("the retirement record goes into %q, the destination is %q", d.retirement.Into, d.store)
				}
			}
			if d.store != tc.want || from != tc.retiredFrom || d.paused() != tc.paused || d.allVersions != tc.all || (d.refusal != "") != tc.refused {
				t.Errorf("destination %q (retired from %q, paused %v, every version %v, refusal %q); want %q (from %q, paused %v, every version %v, refused %v)",
					d.store, from, d.paused(), d.allVersions, d.refusal, tc.want, tc.retiredFrom, tc.paused, tc.all, tc.refused)
			}
		})
	}
}

// TestRetirementLeavesKstatusAlone: a retirement's every state is told in StoreRetired
// and status.retirement, and a claim Ready before stays Current to kstatus (the GitOps
// health checks) through them all, a skipped one too; a claim whose store retires no
// more loses both.
func TestRetirementLeavesKstatusAlone(t *testing.T) {
	queued := &bkv1.MoveStatus{From: "minio", To: "ceph", Phase: bkv1.MoveQueued, Message: "waiting for a move slot"}
	copying := &bkv1.MoveStatus{From: "minio", To: "ceph", Phase: bkv1.MoveCopying, Message: "copying every object"}
	cases := []struct {
		name       string
		home       string
		move       *bkv1.MoveStatus
		paused     bool
		step       moveStep
		wantReason string
		wantText   string
	}{
		{"queued", "minio", queued, false, moveStep{}, bkv1.ReasonRetiring, "Queued: waiting for a move slot"},
		{"paused", "minio", queued, true, moveStep{}, bkv1.ReasonRetirementPaused, "spec.retire.paused"},
		{"copying", "minio", copying, false, moveStep{}, bkv1.ReasonRetiring, "Copying"},
		{"refused by the successor", "minio", queued, false, moveStep{err: reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, `ObjectStore "ceph" refuses the bucket`)}, bkv1.ReasonRetirementSkipped, "cannot follow (MoveNotAllowed)"},
		{"done", "ceph", &bkv1.MoveStatus{From: "minio", To: "ceph", Phase: bkv1.MoveDone}, false, moveStep{}, bkv1.ReasonRetired, "set spec.objectStoreRef.name to ceph"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := claimOn("minio", tc.home, "")
			sb.Status.Move = tc.move
			sb.Status.ObservedGeneration = sb.Generation
			reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady, "ready")
			scope := &bucketScope{sb: sb, dest: destination{store: "ceph", retirement: &bkv1.ClaimRetirement{From: "minio", Into: "ceph", Paused: tc.paused}}}
			r := &Reconciler{}
			r.reportMove(scope, tc.step)
			reportRetirement(scope, tc.step)
			c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionStoreRetired)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.wantText) {
				t.Fatalf("StoreRetired %+v; want True, %s, saying %q", c, tc.wantReason, tc.wantText)
			}
			if rec := sb.Status.Retirement; rec == nil || rec.From != "minio" || rec.Into != "ceph" || (rec.Skipped != "") != (tc.step.err != nil) || heldBack(sb) != (tc.paused || tc.step.err != nil) {
				t.Errorf("status.retirement %+v, held back %v", rec, heldBack(sb))
			}
			for _, typ := range []string{bkv1.ConditionReconciling, bkv1.ConditionStalled} {
				if c := reconcile.FindCondition(sb.Status.Conditions, typ); c != nil {
					t.Errorf("%s set by a retirement: %+v", typ, c)
				}
			}
			if res := kstatusOf(t, sb); res.Status != status.CurrentStatus {
				t.Errorf("kstatus %s (%s), want Current", res.Status, res.Message)
			}
		})
	}
	t.Run("no retirement any more", func(t *testing.T) {
		sb := claimOn("minio", "minio", "minio")
		reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionStoreRetired, metav1.ConditionTrue, bkv1.ReasonRetiring, "moving")
		reportRetirement(&bucketScope{sb: sb, dest: destination{store: "minio"}}, moveStep{})
		if sb.Status.Retirement != nil || reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionStoreRetired) != nil {
			t.Errorf("status.retirement %+v, conditions %+v: want both gone", sb.Status.Retirement, sb.Status.Conditions)
		}
	})
}

func kstatusOf(t *testing.T, sb *bkv1.StorageBucket) *status.Result {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sb)
	if err != nil {
		t.Fatal(err)
	}
	res, err := status.Compute(&unstructured.Unstructured{Object: obj})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestHeldBackMovesHoldNoPlaceInLine: moves a paused retirement holds back, or that
// the successor refuses, asked before another move of the same store, keep it waiting
// for nothing: the store's one slot goes to the move that can start.
func TestHeldBackMovesHoldNoPlaceInLine(t *testing.T) {
	g := newQueueRig(t, "paused", "skipped", "me")
	ctx := context.Background()
	for name, rec := range map[string]*bkv1.ClaimRetirement{
		"paused":  {From: "src", Into: "dst", Paused: true},
		"skipped": {From: "src", Into: "dst", Skipped: bkv1.ReasonMoveNotAllowed},
	} {
		sb := &bkv1.StorageBucket{}
		if err := g.c.Get(ctx, client.ObjectKeyFromObject(g.claims[name]), sb); err != nil {
			t.Fatal(err)
		}
		sb.Status.Retirement = rec
		if err := g.c.Status().Update(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	if m, wait := g.admit(t, "me"); wait || m.Phase != bkv1.MovePlanning {
		t.Errorf("the move asked last, behind a paused and a skipped one: wait %v, phase %s (%s); want it admitted", wait, m.Phase, m.Message)
	}
}

// TestARetiringStoreCreatesNoNewBucket: a new claim naming a retiring store is refused,
// Stalled, and told the successor; a store that does not retire creates as before.
func TestARetiringStoreCreatesNoNewBucket(t *testing.T) {
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "minio"}}
	if err := refuseNewBucketOn(store); err != nil {
		t.Fatalf("a store that does not retire: %v", err)
	}
	store.Spec.Retire = &bkv1.RetireSpec{Into: "ceph"}
	err := reconcile.AsStepError(refuseNewBucketOn(store), "provisioning")
	if err == nil || !err.Terminal || err.Reason != bkv1.ReasonObjectStoreRetiring || !strings.Contains(err.Message, `name "ceph" in spec.objectStoreRef`) {
		t.Errorf("a retiring store: %+v; want ObjectStoreRetiring, terminal, naming ceph", err)
	}
}

// TestARetiredBucketTakesTheProbesShortCut: a claim whose spec names another store than
// its bucket's home may want a move, and takes full passes, unless a retirement took the
// bucket there from the store its spec names.
func TestARetiredBucketTakesTheProbesShortCut(t *testing.T) {
	if !moving(claimOn("minio", "ceph", "")) {
		t.Error("a claim naming another store than its home: not moving")
	}
	if moving(claimOn("minio", "ceph", "minio")) {
		t.Error("a claim a retirement moved from the store its spec names: moving")
	}
	if !moving(claimOn("minio", "other", "minio")) {
		t.Error("a claim living elsewhere than its retirement took it: not moving")
	}
}

// TestRetirementsChoiceOfUndeclaredSettings: a retirement's moves take the choice of
// the first retiring store on the way that makes one (spec.retire.undeclaredSettings);
// a claim's own spec.move.undeclaredSettings wins over it (undeclaredChoice).
func TestRetirementsChoiceOfUndeclaredSettings(t *testing.T) {
	r := retiringStores(t, "minio>old", "old>ceph", "ceph")
	set := func(name string, choice bkv1.UndeclaredSettings) {
		store := &bkv1.ObjectStore{}
		if err := r.Get(context.Background(), client.ObjectKey{Name: name}, store); err != nil {
			t.Fatal(err)
		}
		store.Spec.Retire.UndeclaredSettings = choice
		if err := r.Update(context.Background(), store); err != nil {
			t.Fatal(err)
		}
	}
	choiceOf := func(sb *bkv1.StorageBucket) bkv1.UndeclaredSettings {
		t.Helper()
		d, err := r.destinationOf(context.Background(), sb)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := undeclaredChoice(&bucketScope{sb: sb, dest: d})
		return c
	}
	if c := choiceOf(claimOn("minio", "minio", "")); c != "" {
		t.Errorf("no store chooses: %q", c)
	}
	set("old", bkv1.UndeclaredSettingsDrop)
	if c := choiceOf(claimOn("minio", "minio", "")); c != bkv1.UndeclaredSettingsDrop {
		t.Errorf("the successor on the way chooses Drop: %q", c)
	}
	set("minio", bkv1.UndeclaredSettingsCarry)
	if c := choiceOf(claimOn("minio", "minio", "")); c != bkv1.UndeclaredSettingsCarry {
		t.Errorf("the first retiring store chooses Carry: %q", c)
	}
	sb := claimOn("minio", "minio", "")
	sb.Spec.Move = &bkv1.MoveSpec{UndeclaredSettings: bkv1.UndeclaredSettingsDrop}
	if c := choiceOf(sb); c != bkv1.UndeclaredSettingsDrop {
		t.Errorf("the claim's own Drop: %q", c)
	}
}
