package storagebucket

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/memo"
	"github.com/bucketkeeper/bucketkeeper/internal/quota"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// decideSync is the pass's step that decides, once, whether the bucket and its
// configuration are checked against the store in this pass (scope.syncing): the
// bucket and configuration steps both follow that verdict. It needs the store and the
// checked policy (desiredHash), so it runs after the store and guardrail steps.
func (r *Reconciler) decideSync(_ context.Context, scope *bucketScope) error {
	scope.syncing = r.syncDue(scope)
	return nil
}

// syncDue says whether bucket and configuration must be checked against the store now:
// on a new generation, a changed store, an earlier failure, or every SyncInterval.
//
// After a restart or a leader change the memo is empty. A bucket whose status shows a
// finished sync of the very configuration it wants now (status.applied.hash) is then not
// re-read at once: its next check is put at its own moment within the sync interval
// (syncSlot), so a failover costs a smooth N/interval reads, not N times eight at once.
// A bucket whose desired configuration changed while no one watched is synced at once.
func (r *Reconciler) syncDue(scope *bucketScope) bool {
	sb := scope.sb
	if !settled(sb) {
		return true
	}
	key, version, now := client.ObjectKeyFromObject(sb), syncVersion(scope), r.Clock.Now()
	if r.synced.has(key) {
		return r.synced.due(key, sb.UID, version, now, r.SyncInterval)
	}
	if !resumable(sb, desiredHash(scope, scope.owner)) {
		return true
	}
	// Recorded as if synced one interval before the slot: due from the slot on.
	r.synced.done(key, sb.UID, version, syncSlot(sb.UID, r.SyncInterval, now).Add(-r.SyncInterval))
	return false
}

// syncRequeue is how long until the bucket's next sync is due, for the reconcile's
// RequeueAfter; zero when none is scheduled.
func (r *Reconciler) syncRequeue(sb *bkv1.StorageBucket) time.Duration {
	return r.synced.until(client.ObjectKeyFromObject(sb), sb.UID, r.Clock.Now(), r.SyncInterval)
}

// settled says whether the status shows a finished sync: the bucket is ours and the
// configuration was applied (or what the store lacks was reported). The memo alone is
// not enough: a reconcile may read an object from the cache before its last status write
// arrived, and must then redo the work rather than summarise an empty status.
func settled(sb *bkv1.StorageBucket) bool {
	if sb.Status.BucketName == "" || !reconcile.ConditionIsTrue(sb.Status.Conditions, bkv1.ConditionProvisioned) {
		return false
	}
	c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionConfigured)
	return c != nil && (c.Status == metav1.ConditionTrue || c.Reason == bkv1.ReasonNotSupportedByStore)
}

// resumable says whether a settled bucket unknown to this process may wait for its slot:
// Ready and configured for its current generation, with the configuration it wants now
// recorded as applied. Anything less is checked at once. "Ready" includes the stable
// verdict that the store lacks a setting the spec asks for (Versity and lifecycle):
// reading again at once would only give the same answer.
func resumable(sb *bkv1.StorageBucket, hash string) bool {
	ready := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionReady)
	configured := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionConfigured)
	return sb.Status.Applied != nil && sb.Status.Applied.Hash == hash &&
		ready != nil && ready.ObservedGeneration == sb.Generation &&
		(ready.Status == metav1.ConditionTrue || ready.Reason == bkv1.ReasonNotSupportedByStore) &&
		configured != nil && configured.ObservedGeneration == sb.Generation
}

// syncInputs identifies what a sync was of: the bucket's generation and the store (its
// UID and generation). A sync of other inputs is not a sync of these.
type syncInputs struct {
	generation      int64
	store           types.UID
	storeGeneration int64
}

func syncVersion(scope *bucketScope) syncInputs {
	return syncInputs{generation: scope.sb.Generation, store: scope.store.UID, storeGeneration: scope.store.Generation}
}

// syncSlot is the bucket's next moment on a grid of period interval whose offset is a
// hash of its UID: within (now, now+interval], the same for a bucket across restarts,
// and spread evenly over the interval across buckets (as the probe phases are).
func syncSlot(uid types.UID, interval time.Duration, now time.Time) time.Time {
	if interval <= 0 {
		return now
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	iv := int64(interval)
	phase := int64(h.Sum64() % uint64(iv))
	into := ((now.UnixNano()-phase)%iv + iv) % iv // how far now is past the last slot
	return now.Add(time.Duration(iv - into))
}

// desiredHashSchema changes whenever what desiredHash covers, or how the operator turns it
// into bucket configuration, changes: an upgraded operator then re-checks every bucket.
const desiredHashSchema = 1

// desiredHash digests everything the configuration step brings in line: the settings,
// the ownership tags, where the bucket is and how absent settings are treated. Equal
// hashes mean a sync would apply the same thing again. The policy is the one the
// guardrails passed on (scope.policy, canonical), which is what a sync sends.
func desiredHash(scope *bucketScope, me owner) string {
	sb := scope.sb
	doc, _ := json.Marshal(struct {
		Schema                   int
		Bucket, Region, Endpoint string
		Exclusive                bool
		Owner, Tags              map[string]string
		Versioning               bkv1.VersioningState
		Lifecycle                []s3.LifecycleRule
		PublicAccessBlocked      bool
		Policy                   string
		// Quota is left out while nothing names one, so that the hash of a bucket
		// without a quota is what it was before quotas existed.
		Quota *quota.Limits `json:",omitempty"`
		// ObjectLock likewise, while the spec asks for none.
		ObjectLock *bkv1.ObjectLock `json:",omitempty"`
		// CORS likewise, while the spec has no rules.
		CORS []s3.CORSRule `json:",omitempty"`
		// Carried likewise, while no move carried anything.
		Carried *bkv1.CarriedSettings `json:",omitempty"`
	}{
		Schema: desiredHashSchema, Bucket: scope.bucket, Region: scope.region, Endpoint: stores.Endpoint(scope.store, scope.region),
		Exclusive: createIntended(sb, scope.bucket), Owner: me.tags(), Tags: sb.Spec.Tags, Versioning: sb.Spec.Versioning,
		Lifecycle: lifecycleRules(sb.Spec.Lifecycle), PublicAccessBlocked: sb.Spec.PublicAccess != bkv1.PublicAccessAllowed,
		Policy: scope.policy, Quota: namedQuota(scope.quota), ObjectLock: sb.Spec.ObjectLock,
		CORS: corsRules(sb.Spec.CORS), Carried: sb.Status.Carried,
	})
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:8])
}

func namedQuota(p quotaPlan) *quota.Limits {
	if !p.named {
		return nil
	}
	return &p.want
}

// syncMemo remembers when each StorageBucket's bucket and configuration were last
// checked against the store, so reconciles woken for other reasons (a Secret, the
// store's health) do not re-read eight settings per bucket. It lives in memory; what
// survives a restart is status.applied.hash (see syncDue).
type syncMemo struct {
	records memo.Map[types.NamespacedName, syncRecord]
}

type syncRecord struct {
	uid     types.UID
	version syncInputs
	at      time.Time
}

func (m *syncMemo) due(key types.NamespacedName, uid types.UID, version syncInputs, now time.Time, interval time.Duration) bool {
	rec, ok := m.records.Get(key)
	return !ok || rec.uid != uid || rec.version != version || now.Sub(rec.at) >= interval
}

// has says whether this process has a record of the key, even an expired one.
func (m *syncMemo) has(key types.NamespacedName) bool { return m.records.Has(key) }

// until is how long until the key's sync is due, zero when it is due or unknown.
func (m *syncMemo) until(key types.NamespacedName, uid types.UID, now time.Time, interval time.Duration) time.Duration {
	rec, ok := m.records.Get(key)
	if !ok || rec.uid != uid {
		return 0
	}
	return max(0, rec.at.Add(interval).Sub(now))
}

func (m *syncMemo) done(key types.NamespacedName, uid types.UID, version syncInputs, now time.Time) {
	m.records.Set(key, syncRecord{uid: uid, version: version, at: now})
}

// expire makes the key due at once, whatever its status says: the bucket is known to
// need a check (it vanished from the store).
func (m *syncMemo) expire(key types.NamespacedName) {
	m.records.Set(key, syncRecord{}) // no UID matches: due
}

// forget drops the key's record: the object is gone or being deleted.
func (m *syncMemo) forget(key types.NamespacedName) { m.records.Delete(key) }
