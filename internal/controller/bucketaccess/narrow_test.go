package bucketaccess

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// These tests walk one access through every state its buckets can be in and hold the
// rule after each reconcile: the user's policy names exactly the buckets the spec
// grants that are Ready on the store the key was issued on, and nothing else, before
// the access waits for anything.

const rigUser = "bk-test-access-uid" // iam.UserName("test", "access-uid")

// rigBucket adds a StorageBucket of the rig's namespace on store, Ready (named
// ns-<name>) or not.
func (r *accessRig) rigBucket(name, store string, ready bool) {
	r.t.Helper()
	sb := &bkv1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: store}},
	}
	if err := r.c.Create(context.Background(), sb); err != nil {
		r.t.Fatal(err)
	}
	r.setReady(name, ready)
}

// setReady makes a StorageBucket Ready, or Stalled for a reason that is no guardrail.
func (r *accessRig) setReady(name string, ready bool) {
	r.t.Helper()
	sb := &bkv1.StorageBucket{}
	if err := r.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, sb); err != nil {
		r.t.Fatal(err)
	}
	sb.Status.BucketName = "ns-" + name
	sb.Status.Conditions = []metav1.Condition{{Type: bkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: bkv1.ReasonReady, LastTransitionTime: metav1.Now()}}
	if !ready {
		sb.Status.Conditions = []metav1.Condition{
			{Type: bkv1.ConditionReady, Status: metav1.ConditionFalse, Reason: bkv1.ReasonObjectStoreNotFound, LastTransitionTime: metav1.Now()},
			{Type: bkv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: bkv1.ReasonObjectStoreNotFound, LastTransitionTime: metav1.Now()},
		}
	}
	if err := r.c.Status().Update(context.Background(), sb); err != nil {
		r.t.Fatal(err)
	}
}

// grant sets the access's spec to the named buckets, ReadWrite.
func (r *accessRig) grant(names ...string) {
	r.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ba := r.access()
		ba.Spec.Buckets = nil
		for _, n := range names {
			ba.Spec.Buckets = append(ba.Spec.Buckets, bkv1.BucketGrant{Name: n, Mode: bkv1.AccessReadWrite})
		}
		return r.c.Update(context.Background(), ba)
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

// reconcileOnce runs one reconcile of the access with rec.
func (r *accessRig) reconcileOnce(rec *Reconciler) {
	r.t.Helper()
	if _, err := rec.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "app"}}); err != nil {
		r.t.Logf("reconcile: %v", err)
	}
}

// wantPolicy asserts the user's policy on m grants exactly buckets (none: no policy).
func wantPolicy(t *testing.T, m *memIAM, buckets ...string) {
	t.Helper()
	m.mu.Lock()
	got, ok := m.policy[rigUser]
	m.mu.Unlock()
	if len(buckets) == 0 {
		if ok {
			t.Fatalf("the user holds a policy while its access grants no Ready bucket: %s", got)
		}
		return
	}
	var grants []iam.Grant
	for _, b := range buckets {
		grants = append(grants, iam.Grant{Bucket: b, Mode: iam.ReadWrite})
	}
	want, err := iam.PolicyDocument(grants)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("policy %s, want one on %v", got, buckets)
	}
}

func (r *accessRig) keyIDs(m *memIAM) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	for _, k := range m.keys[rigUser] {
		ids = append(ids, k.ID)
	}
	return ids
}

func (r *accessRig) wantWaiting(reason string) {
	r.t.Helper()
	ba := r.access()
	c := reconcile.FindCondition(ba.Status.Conditions, bkv1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason {
		r.t.Fatalf("Ready = %+v, want False (%s)", c, reason)
	}
}

// TestNarrowsBeforeWaiting: an access edited to name buckets that are not Ready keeps
// its key, but the key reaches only the Ready buckets the spec names, at once; it
// reaches the others once they are Ready.
func TestNarrowsBeforeWaiting(t *testing.T) {
	rig := newAccessRig(t)
	if rigUser != iam.UserName("test", "access-uid") {
		t.Fatalf("rigUser is not the rig access's user %s", iam.UserName("test", "access-uid"))
	}
	rig.settle("")
	wantPolicy(t, rig.mem, "ns-data")
	key := rig.access().Status.AccessKeyID
	rig.rigBucket("logs", "store", true)
	rig.rigBucket("park", "store", false)
	rec := rig.reconciler()

	rig.grant("logs", "park")
	rig.reconcileOnce(rec)
	wantPolicy(t, rig.mem, "ns-logs") // not data: the spec no longer names it
	rig.wantWaiting(bkv1.ReasonBucketNotReady)

	rig.grant("park")
	rig.reconcileOnce(rec)
	wantPolicy(t, rig.mem)
	rig.wantWaiting(bkv1.ReasonBucketNotReady)
	if ids := rig.keyIDs(rig.mem); len(ids) != 1 || ids[0] != key {
		t.Fatalf("keys %v, want the issued key %s kept", ids, key)
	}

	// A fresh process, which never wrote this policy, narrows as well.
	rig.mem.mu.Lock()
	rig.mem.policy[rigUser] = "stale"
	rig.mem.mu.Unlock()
	rig.reconcileOnce(rig.reconciler())
	wantPolicy(t, rig.mem)

	rig.setReady("park", true)
	rig.reconcileOnce(rec)
	wantPolicy(t, rig.mem, "ns-park")
	ba := rig.access()
	if !reconcile.ConditionIsTrue(ba.Status.Conditions, bkv1.ConditionReady) || ba.Status.AccessKeyID != key {
		t.Fatalf("status %+v, want Ready with the same key %s", ba.Status, key)
	}
	rig.check("after park became Ready")
}

// TestNarrowsWhenParkedOnAnotherStore: an access edited to name a bucket on a store
// that does not exist (or on another store, not Ready) leaves its user on the store it
// was issued on without a policy.
func TestNarrowsWhenParkedOnAnotherStore(t *testing.T) {
	rig := newAccessRig(t)
	rig.settle("")
	rig.rigBucket("ghost", "nowhere", false)
	rig.grant("ghost")
	rig.reconcileOnce(rig.reconciler())
	wantPolicy(t, rig.mem)
	rig.wantWaiting(bkv1.ReasonBucketNotReady)

	// Ready on a store that is gone since: nothing to grant there either.
	rig.setReady("ghost", true)
	rig.mem.mu.Lock()
	rig.mem.policy[rigUser] = "stale"
	rig.mem.mu.Unlock()
	rig.reconcileOnce(rig.reconciler())
	wantPolicy(t, rig.mem)
	rig.wantWaiting(bkv1.ReasonObjectStoreNotFound)
}

// TestMovesBetweenStores: an access re-pointed at a Ready bucket on another store (in
// another IAM account) loses its policy on the store it leaves before it is issued a
// key on the other; within one account (one IAM store behind both) it keeps its key.
func TestMovesBetweenStores(t *testing.T) {
	t.Run("another account", func(t *testing.T) {
		rig := newAccessRig(t)
		far := &memIAM{keys: map[string][]iam.AccessKey{}, users: map[string]bool{}, policy: map[string]string{}, clock: rig.clock, next: 1000}
		rig.others = map[string]*memIAM{"http://127.0.0.1:2": far}
		rig.settle("")
		rig.addStore("far", "http://127.0.0.1:2")
		rig.rigBucket("away", "far", true)
		rig.grant("away")
		rig.reconcileOnce(rig.reconciler())
		wantPolicy(t, rig.mem)
		wantPolicy(t, far, "ns-away")
		ba := rig.access()
		if ba.Status.ObjectStore != "far" || len(rig.keyIDs(far)) != 1 || ba.Status.AccessKeyID != rig.keyIDs(far)[0] {
			t.Fatalf("status %+v, keys there %v: want the key issued on far", ba.Status, rig.keyIDs(far))
		}
	})
	t.Run("one account", func(t *testing.T) {
		rig := newAccessRig(t)
		rig.settle("")
		key := rig.access().Status.AccessKeyID
		rig.addStore("twin", "http://127.0.0.1:1")
		rig.rigBucket("away", "twin", true)
		rig.grant("away")
		rig.reconcileOnce(rig.reconciler())
		wantPolicy(t, rig.mem, "ns-away")
		ba := rig.access()
		if ba.Status.ObjectStore != "twin" || ba.Status.AccessKeyID != key || !reconcile.ConditionIsTrue(ba.Status.Conditions, bkv1.ConditionReady) {
			t.Fatalf("status %+v: want Ready on twin with the same key %s", ba.Status, key)
		}
	})
}

// TestRevokesWhateverTheOrder: a bucket missing, or buckets on two stores, revoke the
// key even when a bucket that is merely not Ready comes first in the spec.
func TestRevokesWhateverTheOrder(t *testing.T) {
	for name, second := range map[string]func(*accessRig){
		"a missing bucket":        func(*accessRig) {},
		"a bucket on a 2nd store": func(r *accessRig) { r.addStore("other", "http://127.0.0.1:3"); r.rigBucket("missing", "other", true) },
	} {
		t.Run(name, func(t *testing.T) {
			rig := newAccessRig(t)
			rig.settle("")
			rig.rigBucket("park", "store", false)
			second(rig)
			rig.grant("park", "missing")
			rig.reconcileOnce(rig.reconciler())
			rig.mem.mu.Lock()
			exists := rig.mem.users[rigUser]
			rig.mem.mu.Unlock()
			if exists {
				t.Fatalf("the user is still on the store")
			}
			if id := rig.access().Status.AccessKeyID; id != "" {
				t.Fatalf("status still names key %s", id)
			}
		})
	}
}

func (r *accessRig) addStore(name, endpoint string) {
	r.t.Helper()
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid")}, Spec: bkv1.ObjectStoreSpec{
		Endpoint: endpoint, ForcePathStyle: true, AccessProvider: &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM},
	}}
	if err := r.c.Create(context.Background(), store); err != nil && client.IgnoreAlreadyExists(err) != nil {
		r.t.Fatal(err)
	}
}
