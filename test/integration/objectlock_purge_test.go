package integration_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/controller/storagebucket"
	"github.com/bucketkeeper/bucketkeeper/internal/metrics"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestObjectLockPurge, on each store, with the suite's manager: a Purge claim whose
// bucket holds a version written before its Governance default retention of a day, one
// written under it and a delete marker, and a Purge claim with a Compliance default
// retention, are deleted. Everything the stores let go goes; the locked versions stay;
// each claim reports DeletionBlocked, with the date the retention ends where the store
// gives versions one, a Warning Event and the deletion-blocked metric. Once the store's
// admin allows a Purge to bypass Governance, the first purge completes and its bucket is
// gone; the Compliance version is not bypassed. When the admin's wait ends, that claim
// goes and its bucket is kept, with the version, released and tagged for the admin.
func TestObjectLockPurge(t *testing.T) {
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) {
			t.Parallel()
			testObjectLockPurge(t, server)
		})
	}
}

func testObjectLockPurge(t *testing.T, server *testenv.S3Server) {
	f := newFixture(t, server, func(s *bkv1.ObjectStore) {
		s.Spec.Guardrails.ObjectLock = bkv1.ObjectLockGuardrails{AllowedModes: []bkv1.ObjectLockMode{bkv1.ObjectLockGovernance, bkv1.ObjectLockCompliance},
			ReleaseBlockedDeletionAfter: &metav1.Duration{Duration: time.Hour}}
	})
	purged := func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge }
	vault := f.bucket("vault", purged, func(sb *bkv1.StorageBucket) { sb.Spec.ObjectLock = &bkv1.ObjectLock{} })
	bucket := f.waitCondition(vault, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	must(t, f.admin.PutObject(f.ctx, bucket, "free", []byte("written before the default retention")))
	f.update(k8s, vault, func() { vault.Spec.ObjectLock = governance(1) })
	f.waitObjectLock(vault, "Governance, 1 day")
	must(t, f.admin.PutObject(f.ctx, bucket, "kept", []byte("written under it")))
	written := time.Now()
	must(t, f.admin.DeleteObject(f.ctx, bucket, "free")) // a delete marker on top
	sealed := f.bucket("sealed", purged, func(sb *bkv1.StorageBucket) { sb.Spec.ObjectLock = compliance(1) })
	sealedBucket := f.waitCondition(sealed, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	must(t, f.admin.PutObject(f.ctx, sealedBucket, "evidence", []byte("sealed")))

	must(t, k8s.Delete(f.ctx, vault))
	must(t, k8s.Delete(f.ctx, sealed))
	got := f.waitCondition(vault, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonDeletionBlocked)
	blocked := got.Status.DeletionBlocked
	left := f.versionsOf(bucket)
	if retentionPerVersion(server.Kind) {
		// The version written before the default retention, and the marker, are gone.
		if blocked == nil || blocked.LockedVersions != 1 || blocked.Until == nil ||
			blocked.Until.Before(&metav1.Time{Time: written.Add(24*time.Hour - 2*time.Second)}) || blocked.Until.After(time.Now().Add(24*time.Hour)) {
			t.Fatalf("status.deletionBlocked %+v, want one version until a day after it was written", blocked)
		}
		if left != "kept" {
			t.Errorf("versions left: %s, want the locked one alone", left)
		}
		lockTable.Set(t, server.Kind, rowLockPurge, "what no lock keeps is deleted (delete markers, versions written before the default retention); `DeletionBlocked` with the date the last retention ends")
	} else {
		// The default retention locks every version; only the marker goes.
		if blocked == nil || blocked.LockedVersions != 2 || blocked.Until != nil {
			t.Fatalf("status.deletionBlocked %+v, want two versions, without a date", blocked)
		}
		if left != "free kept" {
			t.Errorf("versions left: %s, want both versions", left)
		}
		lockTable.Set(t, server.Kind, rowLockPurge, "delete markers deleted, every version kept by the default retention; `DeletionBlocked` without a date (the store reports none)")
	}
	msg := findCond(got, bkv1.ConditionReady).Message
	for _, want := range []string{"Governance retention", "purgeMayBypassGovernance", "releaseBlockedDeletionAfter", bkv1.TagDeletionBlocked} {
		if !strings.Contains(msg, want) {
			t.Errorf("DeletionBlocked message lacks %q: %s", want, msg)
		}
	}
	f.waitEvent(got, bkv1.ReasonDeletionBlocked)
	if since, ok := series(t, metrics.BucketDeletionBlocked, map[string]string{"namespace": f.ns, "name": "vault"}); !ok || int64(since) != blocked.Since.Unix() {
		t.Errorf("deletion-blocked metric: %v (present %v), want %d", since, ok, blocked.Since.Unix())
	}
	f.waitCondition(sealed, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonDeletionBlocked)

	// The store's admin allows the bypass: the Governance purge completes.
	inspected := requests.snapshot(f.store)["GetObjectRetention"]
	f.updateStore(func(s *bkv1.ObjectStoreSpec) { s.Guardrails.ObjectLock.PurgeMayBypassGovernance = true })
	f.waitGone(vault)
	if _, err := f.admin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
		t.Fatalf("the purged bucket: %v, want it gone", err)
	}
	if _, ok := series(t, metrics.BucketDeletionBlocked, map[string]string{"namespace": f.ns, "name": "vault"}); ok {
		t.Errorf("the deletion-blocked metric outlives the claim")
	}
	lockTable.Set(t, server.Kind, rowLockBypass, "yes: the purge completes")

	// The Compliance claim had a pass with the bypass allowed too (it asked the store
	// about its locked version again), and its version is still there.
	f.eventually(time.Minute, "a pass of the Compliance claim's purge with the bypass allowed", func() error {
		if n := requests.snapshot(f.store)["GetObjectRetention"]; n <= inspected {
			return fmt.Errorf("GetObjectRetention %d times, %d before the bypass", n, inspected)
		}
		return nil
	})
	f.waitCondition(sealed, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonDeletionBlocked)
	if left := f.versionsOf(sealedBucket); left != "evidence" {
		t.Fatalf("the Compliance bucket holds %q, want its version", left)
	}
	lockTable.Set(t, server.Kind, rowLockComply, "never bypassed: the version stays, `DeletionBlocked`")

	// The admin's wait ends: the claim goes, its bucket is kept with the version,
	// released and tagged for the admin.
	f.updateStore(func(s *bkv1.ObjectStoreSpec) {
		s.Guardrails.ObjectLock.ReleaseBlockedDeletionAfter = &metav1.Duration{}
	})
	f.waitGone(sealed)
	f.waitEvent(sealed, bkv1.EventReasonBucketReleased)
	tags, err := f.admin.GetBucketTagging(f.ctx, sealedBucket)
	must(t, err)
	if tags[bkv1.TagUID] != f.releasedUIDTag() || !strings.HasPrefix(tags[bkv1.TagDeletionBlocked], "Purge blocked by 1 locked object versions") {
		t.Errorf("the kept bucket's tags: %v", tags)
	}
	if left := f.versionsOf(sealedBucket); left != "evidence" {
		t.Errorf("the kept bucket holds %q, want its version", left)
	}
}

// TestObjectLockNamespaceDeletion, on each store: a tenant's namespace is deleted while
// its Purge claim's bucket holds a version under a Governance retention of a day, and
// the store's admin left guardrails.objectLock.releaseBlockedDeletionAfter at its
// default, a day. A reconciler on a fake clock (this is the operator's own bound) finds
// the deletion blocked and asks to come back when the retention ends (a sync interval
// where the store tells no date); a day later on
// that clock it keeps the bucket, released and tagged, and lets the claim go, so the
// namespace is finalized. The bucket and its version are still on the store, tagged as
// retained from that namespace.
func TestObjectLockNamespaceDeletion(t *testing.T) {
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) {
			t.Parallel()
			testObjectLockNamespaceDeletion(t, server)
		})
	}
}

func testObjectLockNamespaceDeletion(t *testing.T, server *testenv.S3Server) {
	f := newFixture(t, server)
	tenantNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sb-lock-tenant-"}}
	must(t, k8s.Create(f.ctx, tenantNS))
	t.Cleanup(func() {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(tenantNS), &corev1.Namespace{}); err == nil {
			removeNamespace(t, f.ctx, tenantNS.Name)
		}
	})
	clk := clocktesting.NewFakeClock(time.Now())
	r := &storagebucket.Reconciler{Client: k8sWatch, Recorder: events.NewFakeRecorder(100), Clock: clk, SyncInterval: time.Hour,
		Stores: &stores.Registry{Client: k8s, APIReader: k8s, Factory: s3.New}, ClusterID: clusterID}
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS.Name, Name: "archive", Labels: map[string]string{isolatedLabel: f.ns}},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, DeletionPolicy: bkv1.DeletionPolicyPurge, ObjectLock: governance(1)}}
	must(t, k8s.Create(f.ctx, sb))
	req := ctrl.Request{NamespacedName: objKey(sb)}
	reconcileOnce := func() ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(f.ctx, req)
		if err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		return res
	}
	f.waitStoreCondition(bkv1.ConditionReady, metav1.ConditionTrue)
	for range 5 {
		if reconcileOnce(); findCond(f.get(sb), bkv1.ConditionReady).Status == metav1.ConditionTrue {
			break
		}
	}
	bucket := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	must(t, f.admin.PutObject(f.ctx, bucket, "minutes", []byte("kept for a day")))

	// The namespace is deleted; the namespace controller deletes what is in it.
	must(t, k8s.Delete(f.ctx, tenantNS))
	must(t, k8s.DeleteAllOf(f.ctx, &bkv1.StorageBucket{}, client.InNamespace(tenantNS.Name)))
	res := reconcileOnce()
	got := f.get(sb)
	blocked := got.Status.DeletionBlocked
	if c := findCond(got, bkv1.ConditionReady); c.Reason != bkv1.ReasonDeletionBlocked || blocked == nil {
		t.Fatalf("after the namespace's deletion: %s, status.deletionBlocked %+v", describe(got.Status.Conditions), blocked)
	}
	if !blocked.ReleaseAt.Time.Equal(blocked.Since.Add(24 * time.Hour)) {
		t.Errorf("status.deletionBlocked %+v, want the claim released a day after it was blocked", blocked)
	}
	switch {
	case !retentionPerVersion(server.Kind) && res.RequeueAfter != r.SyncInterval:
		t.Errorf("asks to come back in %v, want a sync interval: the store tells no date", res.RequeueAfter)
	case retentionPerVersion(server.Kind) && (res.RequeueAfter < 23*time.Hour || res.RequeueAfter > 24*time.Hour):
		t.Errorf("asks to come back in %v, want when the retention ends (about a day)", res.RequeueAfter)
	}

	clk.Step(24 * time.Hour)
	reconcileOnce()
	if err := k8s.Get(f.ctx, objKey(sb), &bkv1.StorageBucket{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the claim a day later: %v, want it gone", err)
	}
	removeNamespace(t, f.ctx, tenantNS.Name) // what the namespace controller does once it is empty

	if left := f.versionsOf(bucket); left != "minutes" {
		t.Errorf("the kept bucket holds %q, want its locked version", left)
	}
	tags, err := f.admin.GetBucketTagging(f.ctx, bucket)
	must(t, err)
	if tags[bkv1.TagUID] != "/"+string(tenantNS.UID) || tags[bkv1.TagDeletionBlocked] == "" {
		t.Errorf("the kept bucket's tags: %v; want it released from the namespace and tagged %s", tags, bkv1.TagDeletionBlocked)
	}
}

// versionsOf lists the keys of a bucket's versions, markers left out, in order.
func (f *fixture) versionsOf(bucket string) string {
	f.t.Helper()
	page, err := f.admin.ListObjectVersions(f.ctx, bucket, nil)
	must(f.t, err)
	var keys []string
	for _, v := range page.Versions {
		if !v.IsDeleteMarker {
			keys = append(keys, v.Key)
		}
	}
	return strings.Join(keys, " ")
}

// lockBound is the guardrails.objectLock.releaseBlockedDeletionAfter of the stores in
// the tests of a deletion's bound: short enough for a test to wait it out, long enough
// for it to see each claim blocked first.
const lockBound = 30 * time.Second

// lockBoundSlack is how much later than its releaseAt a claim may go: the pass that
// releases it, a status write and the removal of its finalizer on a loaded machine.
const lockBoundSlack = 20 * time.Second

// withLockBound sets the store's releaseBlockedDeletionAfter to lockBound.
func withLockBound(s *bkv1.ObjectStore) {
	s.Spec.Guardrails.ObjectLock.ReleaseBlockedDeletionAfter = &metav1.Duration{Duration: lockBound}
}

// TestObjectLockDeletionEndsWithinTheBound, on each store, with the suite's manager: a
// tenant's namespace holds a Delete and a Purge claim whose buckets each hold a version
// under a Governance retention of a day, and a Delete claim of the same kind sits in
// another namespace. The lone claim is deleted, then the tenant's namespace. Every one of
// the three reports DeletionBlocked (the Delete claims too, not BucketNotEmpty, which
// would tell the tenant to empty a bucket nobody may empty), with the deletion-blocked
// metric and a remedy the tenant can follow (deletionPolicy Purge, the Orphan
// annotation, the wait), and goes within the store's releaseBlockedDeletionAfter of when
// it blocked, so the namespace can be finalized. Each bucket is kept with its locked
// version, released and tagged for the store's admin with the policy that was blocked.
func TestObjectLockDeletionEndsWithinTheBound(t *testing.T) {
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) {
			t.Parallel()
			testObjectLockDeletionBound(t, server)
		})
	}
}

func testObjectLockDeletionBound(t *testing.T, server *testenv.S3Server) {
	f := newFixture(t, server, withLockBound)
	f.longer(6 * time.Minute)
	tenant := f.tenantNamespace("sb-lock-bound-")
	locked := func(policy bkv1.DeletionPolicy) func(*bkv1.StorageBucket) {
		return func(sb *bkv1.StorageBucket) {
			sb.Spec.DeletionPolicy = policy
			sb.Spec.ObjectLock = governance(1)
		}
	}
	claims := []*bkv1.StorageBucket{
		f.bucket("alone", locked(bkv1.DeletionPolicyDelete)),
		f.bucketIn(tenant.Name, "deleted", locked(bkv1.DeletionPolicyDelete)),
		f.bucketIn(tenant.Name, "purged", locked(bkv1.DeletionPolicyPurge)),
	}
	buckets := map[string]string{}
	for _, sb := range claims {
		buckets[sb.Name] = f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
		must(t, f.admin.PutObject(f.ctx, buckets[sb.Name], "minutes", []byte("kept for a day")))
	}

	must(t, k8s.Delete(f.ctx, claims[0]))
	// The namespace is deleted; the namespace controller deletes what is in it.
	must(t, k8s.Delete(f.ctx, tenant))
	must(t, k8s.DeleteAllOf(f.ctx, &bkv1.StorageBucket{}, client.InNamespace(tenant.Name)))

	blocked := map[string]*bkv1.DeletionBlocked{}
	for _, sb := range claims {
		got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonDeletionBlocked)
		b := got.Status.DeletionBlocked
		if b == nil || b.LockedVersions < 1 || !b.ReleaseAt.Time.Equal(b.Since.Add(lockBound)) {
			t.Fatalf("%s: status.deletionBlocked %+v, want a locked version and the claim released %s after it blocked", sb.Name, b, lockBound)
		}
		blocked[sb.Name] = b
		msg := findCond(got, bkv1.ConditionReady).Message
		wants := []string{"releaseBlockedDeletionAfter", bkv1.TagDeletionBlocked, bkv1.AnnotationDeletionPolicy}
		if sb.Spec.DeletionPolicy == bkv1.DeletionPolicyDelete {
			wants = append(wants, "deletionPolicy Delete", "set deletionPolicy Purge")
			if strings.Contains(msg, "empty it") {
				t.Errorf("%s: the message tells the tenant to empty a bucket with locked versions: %s", sb.Name, msg)
			}
		}
		for _, want := range wants {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: DeletionBlocked message lacks %q: %s", sb.Name, want, msg)
			}
		}
		if since, ok := series(t, metrics.BucketDeletionBlocked, map[string]string{"namespace": sb.Namespace, "name": sb.Name}); !ok || int64(since) != b.Since.Unix() {
			t.Errorf("%s: deletion-blocked metric %v (present %v), want %d", sb.Name, since, ok, b.Since.Unix())
		}
	}

	for _, sb := range claims {
		f.eventually(lockBound+lockBoundSlack+time.Minute, "the release of "+sb.Name, func() error {
			err := k8s.Get(f.ctx, objKey(sb), &bkv1.StorageBucket{})
			if err == nil {
				return fmt.Errorf("still there")
			}
			return client.IgnoreNotFound(err)
		})
		late := time.Since(blocked[sb.Name].ReleaseAt.Time)
		if late > lockBoundSlack {
			t.Errorf("%s went %s after its releaseAt, more than %s", sb.Name, late.Round(time.Second), lockBoundSlack)
		}
		t.Logf("%s blocked at %s, gone %s after its releaseAt", sb.Name, blocked[sb.Name].Since.Format(time.TimeOnly), late.Round(100*time.Millisecond))
		if _, ok := series(t, metrics.BucketDeletionBlocked, map[string]string{"namespace": sb.Namespace, "name": sb.Name}); ok {
			t.Errorf("%s: the deletion-blocked metric outlives the claim", sb.Name)
		}
		bucket := buckets[sb.Name]
		if left := f.versionsOf(bucket); left != "minutes" {
			t.Errorf("%s: the kept bucket holds %q, want its locked version", sb.Name, left)
		}
		tags, err := f.admin.GetBucketTagging(f.ctx, bucket)
		must(t, err)
		releasedFrom := "/" + string(tenant.UID)
		if sb.Namespace == f.ns {
			releasedFrom = f.releasedUIDTag()
		}
		if tags[bkv1.TagUID] != releasedFrom || !strings.HasPrefix(tags[bkv1.TagDeletionBlocked], string(sb.Spec.DeletionPolicy)+" blocked by 1 locked object versions") {
			t.Errorf("%s: the kept bucket's tags %v; want it released and tagged %s", sb.Name, tags, bkv1.TagDeletionBlocked)
		}
	}
	removeNamespace(t, f.ctx, tenant.Name) // what the namespace controller does once it is empty
}
