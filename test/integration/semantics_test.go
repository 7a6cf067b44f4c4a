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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// kstatusOf computes kstatus from the object as the API server has it, the way Flux,
// Argo CD and `kubectl` read it: from unstructured content, with no knowledge of ours.
func (f *fixture) kstatusOf(kind string, key client.ObjectKey) *status.Result {
	f.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(bkv1.GroupVersion.WithKind(kind))
	must(f.t, k8s.Get(f.ctx, key, u))
	res, err := status.Compute(u)
	must(f.t, err)
	return res
}

// waitKstatus waits until kstatus computes want for the object.
func (f *fixture) waitKstatus(kind string, key client.ObjectKey, want status.Status) {
	f.t.Helper()
	f.eventually(60*time.Second, fmt.Sprintf("kstatus %s of %s %s", want, kind, key.Name), func() error {
		if res := f.kstatusOf(kind, key); res.Status != want {
			return errf("kstatus %s (%s)", res.Status, res.Message)
		}
		return nil
	})
}

func (f *fixture) waitNamedStoreCondition(name, typ string, st metav1.ConditionStatus, reason string) *bkv1.ObjectStore {
	f.t.Helper()
	var store *bkv1.ObjectStore
	f.eventually(60*time.Second, fmt.Sprintf("%s=%s (%s) on ObjectStore %s", typ, st, reason, name), func() error {
		store = &bkv1.ObjectStore{}
		if err := k8s.Get(f.ctx, client.ObjectKey{Name: name}, store); err != nil {
			return err
		}
		c := findStoreCond(store, typ)
		if c == nil || c.Status != st || (reason != "" && c.Reason != reason) {
			return errf("conditions: %s", describe(store.Status.Conditions))
		}
		return nil
	})
	return store
}

// extraStore creates another ObjectStore for this test's namespace, removed at the end.
func (f *fixture) extraStore(suffix string, mutate func(*bkv1.ObjectStore)) string {
	f.t.Helper()
	store := &bkv1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: f.store + "-" + suffix},
		Spec: bkv1.ObjectStoreSpec{
			Endpoint: f.server.Endpoint, Region: f.server.Region, ForcePathStyle: true,
			CredentialsSecretRef: &bkv1.SecretReference{Namespace: f.ns, Name: "store-credentials"},
			HealthCheck:          bkv1.StoreHealthCheck{Interval: &metav1.Duration{Duration: 5 * time.Second}},
		},
	}
	mutate(store)
	must(f.t, k8s.Create(f.ctx, store))
	f.t.Cleanup(func() { _ = k8s.Delete(context.Background(), store) })
	return store.Name
}

// TestObjectStoreKstatus: every health verdict of an ObjectStore reads as what it is:
// Current when Ready, InProgress while unreachable (retrying), Failed when a person
// must fix credentials or TLS, Terminating while its deletion waits.
func TestObjectStoreKstatus(t *testing.T) {
	f := newFixture(t, seaweed)
	f.waitNamedStoreCondition(f.store, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	f.waitKstatus("ObjectStore", client.ObjectKey{Name: f.store}, status.CurrentStatus)

	must(t, k8s.Create(f.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "wrong-credentials"},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: seaweed.AccessKeyID, bkv1.CredentialsKeySecretAccessKey: "not-the-secret-key"},
	}))
	addr, err := testenv.FreeAddr() // nothing listens there
	must(t, err)
	cases := []struct {
		name   string
		mutate func(*bkv1.ObjectStore)
		reason string
		want   status.Status
		cond   string
	}{
		{"unreachable", func(s *bkv1.ObjectStore) { s.Spec.Endpoint = "http://" + addr }, bkv1.ReasonStoreUnreachable, status.InProgressStatus, bkv1.ConditionReconciling},
		{"badcreds", func(s *bkv1.ObjectStore) { s.Spec.CredentialsSecretRef.Name = "wrong-credentials" }, bkv1.ReasonCredentialsInvalid, status.FailedStatus, bkv1.ConditionStalled},
		{"nocreds", func(s *bkv1.ObjectStore) { s.Spec.CredentialsSecretRef.Name = "no-such-secret" }, bkv1.ReasonCredentialsMissing, status.FailedStatus, bkv1.ConditionStalled},
		{"tls", func(s *bkv1.ObjectStore) {
			s.Spec.Endpoint = strings.Replace(seaweed.Endpoint, "http://", "https://", 1)
		}, bkv1.ReasonTLSError, status.FailedStatus, bkv1.ConditionStalled},
	}
	for _, tc := range cases {
		name := f.extraStore(tc.name, tc.mutate)
		store := f.waitNamedStoreCondition(name, bkv1.ConditionReady, metav1.ConditionFalse, tc.reason)
		if c := findStoreCond(store, tc.cond); c == nil || c.Status != metav1.ConditionTrue || c.Reason != tc.reason {
			t.Errorf("%s: want %s=True (%s): %s", tc.name, tc.cond, tc.reason, describe(store.Status.Conditions))
		}
		f.waitKstatus("ObjectStore", client.ObjectKey{Name: name}, tc.want)
	}

	// Fixed, a stalled store drops Stalled and is Current again.
	fixed := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store + "-badcreds"}}
	f.update(k8s, fixed, func() { fixed.Spec.CredentialsSecretRef.Name = "store-credentials" })
	store := f.waitNamedStoreCondition(fixed.Name, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	if findStoreCond(store, bkv1.ConditionStalled) != nil || findStoreCond(store, bkv1.ConditionReconciling) != nil {
		t.Errorf("a Ready store keeps Stalled or Reconciling: %s", describe(store.Status.Conditions))
	}
	f.waitKstatus("ObjectStore", client.ObjectKey{Name: fixed.Name}, status.CurrentStatus)

	// In use, its deletion waits: Terminating.
	sb := f.bucket("user")
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	must(t, k8s.Delete(f.ctx, &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}}))
	f.waitNamedStoreCondition(f.store, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonInUse)
	f.waitKstatus("ObjectStore", client.ObjectKey{Name: f.store}, status.TerminatingStatus)
}

// TestStorageBucketKstatus: Ready is Current, a refusal a person must fix is Failed, a
// suspended bucket is Current with Suspended=True and Reconciling=False and its printer
// column says so, and a bucket whose deletion waits is Terminating. (Waiting for a
// store and a store outage are in TestStoreBlipKeepsReady.)
func TestStorageBucketKstatus(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := f.bucket("fine", func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete })
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	f.waitKstatus("StorageBucket", objKey(sb), status.CurrentStatus)

	orphan := f.bucket("nostore", func(sb *bkv1.StorageBucket) { sb.Spec.ObjectStoreRef.Name = "no-such-store-" + f.ns })
	f.waitCondition(orphan, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonObjectStoreNotFound)
	f.waitKstatus("StorageBucket", objKey(orphan), status.FailedStatus)

	// Suspended: the verdict stays, the suspension is spelled out.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Suspend = true
	must(t, k8s.Patch(f.ctx, got, patch))
	susp := f.waitCondition(sb, bkv1.ConditionSuspended, metav1.ConditionTrue, bkv1.ReasonSuspended)
	if c := findCond(susp, bkv1.ConditionReconciling); c == nil || c.Status != metav1.ConditionFalse || c.Reason != bkv1.ReasonSuspended {
		t.Errorf("suspended: want Reconciling=False (Suspended): %s", describe(susp.Status.Conditions))
	}
	if c := findCond(susp, bkv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("suspended: Ready lost its verdict: %s", describe(susp.Status.Conditions))
	}
	if susp.Status.ObservedGeneration != susp.Generation {
		t.Errorf("suspended: observedGeneration %d, generation %d", susp.Status.ObservedGeneration, susp.Generation)
	}
	f.waitKstatus("StorageBucket", objKey(sb), status.CurrentStatus)
	if col := f.table("storagebuckets")["fine"]["Suspended"]; col != "true" {
		t.Errorf("Suspended column = %q, want true", col)
	}

	// Resumed: the suspension's conditions go.
	got = f.get(sb)
	patch = client.MergeFrom(got.DeepCopy())
	got.Spec.Suspend = false
	must(t, k8s.Patch(f.ctx, got, patch))
	f.eventually(60*time.Second, "the suspension to be lifted", func() error {
		cur := f.get(sb)
		if findCond(cur, bkv1.ConditionSuspended) != nil || findCond(cur, bkv1.ConditionReconciling) != nil || cur.Status.ObservedGeneration != cur.Generation {
			return errf("conditions: %s", describe(cur.Status.Conditions))
		}
		return nil
	})
	f.waitKstatus("StorageBucket", objKey(sb), status.CurrentStatus)
	if col := f.table("storagebuckets")["fine"]["Suspended"]; col != "false" && col != "<nil>" {
		t.Errorf("Suspended column = %q after resuming", col)
	}

	// Deletion blocked by an object (deletionPolicy Delete): Terminating, and the
	// message tells how to get on.
	must(t, f.admin.PutObject(f.ctx, got.Status.BucketName, "keep.txt", []byte("x")))
	must(t, k8s.Delete(f.ctx, got))
	blocked := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonBucketNotEmpty)
	if msg := findCond(blocked, bkv1.ConditionReady).Message; !strings.Contains(msg, "deletionPolicy Purge") {
		t.Errorf("BucketNotEmpty message lacks the way out: %s", msg)
	}
	f.waitKstatus("StorageBucket", objKey(sb), status.TerminatingStatus)
	must(t, f.admin.DeleteObject(f.ctx, got.Status.BucketName, "keep.txt"))
	f.waitGone(got)
}

// TestStoreBlipKeepsReady: when the store stops answering, provisioned buckets keep
// Ready=True (never a Ready=False or Reconciling write, watched on every version the
// API server stores) and report the outage as Available=Unknown/StoreUnreachable; the
// store itself is InProgress. A bucket created during the outage waits with
// Ready=False. Back up, everything is Available and Ready.
func TestStoreBlipKeepsReady(t *testing.T) {
	server := testenv.NewS3(t, testenv.Versity)
	f := newFixture(t, server)
	var sbs []*bkv1.StorageBucket
	for i := range 3 {
		sbs = append(sbs, f.bucket(fmt.Sprintf("steady-%d", i), probeEvery(10*time.Second, bkv1.ProbeModeHead)))
	}
	for _, sb := range sbs {
		f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
		f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	}

	// Every version of every bucket from here on, as the API server stores it.
	w, err := k8sWatch.Watch(f.ctx, &bkv1.StorageBucketList{}, client.InNamespace(f.ns))
	must(t, err)
	var mu sync.Mutex
	var flips []string
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range w.ResultChan() {
			sb, ok := ev.Object.(*bkv1.StorageBucket)
			if !ok || ev.Type == watch.Deleted || !strings.HasPrefix(sb.Name, "steady-") {
				continue
			}
			ready, rec := findCond(sb, bkv1.ConditionReady), findCond(sb, bkv1.ConditionReconciling)
			if ready == nil || ready.Status != metav1.ConditionTrue || rec != nil {
				mu.Lock()
				flips = append(flips, fmt.Sprintf("%s@%s: %s", sb.Name, sb.ResourceVersion, describe(sb.Status.Conditions)))
				mu.Unlock()
			}
		}
	}()

	must(t, server.Stop())
	f.waitNamedStoreCondition(f.store, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonStoreUnreachable)
	f.waitKstatus("ObjectStore", client.ObjectKey{Name: f.store}, status.InProgressStatus)
	for _, sb := range sbs {
		f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionUnknown, bkv1.ReasonStoreUnreachable)
		f.waitKstatus("StorageBucket", objKey(sb), status.CurrentStatus)
	}
	late := f.bucket("late")
	waiting := f.waitCondition(late, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonStoreUnreachable)
	if c := findCond(waiting, bkv1.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("a bucket never provisioned must wait with Reconciling=True: %s", describe(waiting.Status.Conditions))
	}
	f.waitKstatus("StorageBucket", objKey(late), status.InProgressStatus)

	must(t, server.Start())
	f.waitNamedStoreCondition(f.store, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	for _, sb := range sbs {
		f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	}
	f.waitCondition(late, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	f.waitKstatus("ObjectStore", client.ObjectKey{Name: f.store}, status.CurrentStatus)
	w.Stop()
	<-watched
	mu.Lock()
	defer mu.Unlock()
	if len(flips) > 0 {
		t.Errorf("the outage flipped provisioned buckets (%d versions):\n%s", len(flips), strings.Join(flips, "\n"))
	}
}

// TestBucketAccessKstatus: a BucketAccess waiting for its bucket is InProgress, one
// whose store cannot issue keys is Failed, and one whose key is issued is Current.
func TestBucketAccessKstatus(t *testing.T) {
	f := newFixture(t, seaweed, withIAMOn(seaweed))
	f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	ba := f.access("early", "early-creds", bkv1.BucketGrant{Name: "later", Mode: bkv1.AccessReadWrite})
	f.waitAccessCondition(ba, bkv1.ConditionReconciling, metav1.ConditionTrue, bkv1.ReasonBucketNotReady)
	f.waitKstatus("BucketAccess", objKey(ba), status.InProgressStatus)
	f.bucket("later")
	f.waitAccessReady(ba)
	f.waitKstatus("BucketAccess", objKey(ba), status.CurrentStatus)

	plain := newFixture(t, seaweed) // no IAM access provider
	plain.bucket("data")
	refused := plain.access("nokeys", "nokeys-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadOnly})
	plain.waitAccessCondition(refused, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonAccessProviderNotIAM)
	plain.waitKstatus("BucketAccess", objKey(refused), status.FailedStatus)
}
