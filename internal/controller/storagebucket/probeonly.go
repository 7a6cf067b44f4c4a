package storagebucket

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/memo"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// A probe that finds the bucket healthy writes nothing, so it should cost little more
// than its request. Between two full passes, nothing a full pass reads may change
// without one of these changing too: the StorageBucket's resourceVersion (its spec,
// labels, annotations, finalizers and status), the store's identity, generation and
// verdict, the connection Secret's and the implicit BucketAccess's resourceVersions, and
// the application credentials copied into that Secret. When all of them are as the last
// full pass left them, and neither a sync nor a probe request is due, a reconcile only
// keeps the availability verdict (reconcileAvailability) and skips the steps, whose
// answer is known. Whatever woke the reconcile, the decision is made from that state,
// never from the trigger, so a spec change, a store verdict, a deleted Secret, a
// deletion or a suspension arriving between probes still gets its full pass.

// passMemo remembers, per StorageBucket, what its last full pass that ended Ready saw.
// It lives in memory: after a restart the first pass of every bucket is a full one.
type passMemo struct {
	records memo.Map[types.NamespacedName, passRecord]
}

// passRecord is what a full pass saw; equal again means a full pass would find the same.
type passRecord struct {
	uid types.UID
	// object is the StorageBucket's resourceVersion once the pass's status write (if
	// any) was made.
	object string
	// store and storeGeneration identify the ObjectStore and its spec.
	store           types.UID
	storeGeneration int64
	// secret, access and appCredentials are the resourceVersions of the connection
	// Secret, of the implicit BucketAccess ("" for none) and of the application
	// credentials Secret whose keys the connection Secret carries ("" for none).
	secret, access, appCredentials string
}

func (m *passMemo) get(key types.NamespacedName) (passRecord, bool) { return m.records.Get(key) }

func (m *passMemo) remember(key types.NamespacedName, rec passRecord) { m.records.Set(key, rec) }

// wrote moves the record on to the object's new resourceVersion after a status write
// the record already accounts for.
func (m *passMemo) wrote(key types.NamespacedName, uid types.UID, from, to string) {
	m.records.Update(key, func(rec passRecord, ok bool) (passRecord, bool) {
		if ok && rec.uid == uid && rec.object == from {
			rec.object = to
		}
		return rec, ok
	})
}

func (m *passMemo) forget(key types.NamespacedName) { m.records.Delete(key) }

// rememberPass records what a full pass saw, when it ended with the bucket Ready for its
// generation; any other outcome forgets, so the next reconcile is a full pass again.
func (r *Reconciler) rememberPass(scope *bucketScope, patcher *reconcile.StatusPatcher, failure *reconcile.StepError) {
	sb := scope.sb
	key := client.ObjectKeyFromObject(sb)
	if failure != nil || scope.store == nil || scope.secretVersion == "" || !lastVerified(sb) || !reconcile.ConditionIsTrue(sb.Status.Conditions, bkv1.ConditionReady) {
		r.passes.forget(key)
		return
	}
	r.passes.remember(key, passRecord{
		uid: sb.UID, object: sb.ResourceVersion,
		store: scope.store.UID, storeGeneration: scope.store.Generation,
		secret: scope.secretVersion, access: scope.accessVersion, appCredentials: scope.appCredentialsVersion,
	})
	r.followWrite(patcher, key, sb)
}

// followWrite keeps the record on the object's resourceVersion across this reconcile's
// own status write, which changes nothing a full pass reads but the status it made.
func (r *Reconciler) followWrite(patcher *reconcile.StatusPatcher, key types.NamespacedName, sb *bkv1.StorageBucket) {
	from := sb.ResourceVersion
	patcher.AfterWrite(func() { r.passes.wrote(key, sb.UID, from, sb.ResourceVersion) })
}

// probeOnly is the reconcile of a bucket that only its probe may concern (see the
// comment at the top of this file). It reports false, having done nothing, when a full
// pass is needed.
func (r *Reconciler) probeOnly(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher) (ctrl.Result, bool) {
	if r.Prober == nil || r.Prober.Naive {
		// The benchmark's baseline models a design that reconciles in full on every tick.
		return ctrl.Result{}, false
	}
	key := client.ObjectKeyFromObject(sb)
	rec, ok := r.passes.get(key)
	if !ok || rec.uid != sb.UID || rec.object != sb.ResourceVersion || !lastVerified(sb) || !reconcile.ConditionIsTrue(sb.Status.Conditions, bkv1.ConditionReady) || moving(sb) || sourceDeletionDue(sb, r.Clock.Now()) {
		return ctrl.Result{}, false
	}
	if requested := sb.Annotations[bkv1.AnnotationProbeRequestedAt]; requested != "" && requested != sb.Status.LastHandledProbeRequest {
		return ctrl.Result{}, false
	}
	scope, ok := r.unchangedScope(ctx, sb, rec)
	if !ok {
		return ctrl.Result{}, false
	}
	scope.patcher = patcher
	if r.synced.due(key, sb.UID, syncVersion(scope), r.Clock.Now(), r.SyncInterval) {
		return ctrl.Result{}, false
	}

	r.followWrite(patcher, key, sb)
	probeRequeue := r.reconcileAvailability(ctx, scope, patcher, nil)
	result := ctrl.Result{RequeueAfter: earliestDelay(probeRequeue, r.syncRequeue(sb))}
	return withoutCoveredTimer(result, r.Clock.Now(), scope.probeWake), true
}

// unchangedScope reads, from the cache, the store and the children a full pass would
// read, and builds the scope of a probe when all are as rec says.
func (r *Reconciler) unchangedScope(ctx context.Context, sb *bkv1.StorageBucket, rec passRecord) (*bucketScope, bool) {
	store, err := r.usableStore(ctx, sb, sb.HomeStore())
	if err != nil || store.UID != rec.store || store.Generation != rec.storeGeneration {
		return nil, false
	}
	if v, err := r.cachedVersion(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: connectionSecretName(sb)}, &corev1.Secret{}); err != nil || v != rec.secret {
		return nil, false
	}
	if v, err := r.cachedVersion(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}, &bkv1.BucketAccess{}); err != nil || v != rec.access {
		return nil, false
	}
	if ref := store.Spec.ApplicationCredentialsSecretRef; ref != nil && stores.AccessProviderOf(store) == bkv1.AccessProviderStatic {
		if v, err := r.cachedVersion(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &corev1.Secret{}); err != nil || v != rec.appCredentials {
			return nil, false
		}
	}
	c, region, err := r.bucketClient(ctx, sb, store)
	if err != nil {
		return nil, false
	}
	return &bucketScope{sb: sb, store: store, s3: c, bucket: bucketNameFor(sb, store), region: region}, true
}

// cachedVersion is the resourceVersion of an object, "" when it does not exist.
func (r *Reconciler) cachedVersion(ctx context.Context, key types.NamespacedName, obj client.Object) (string, error) {
	if err := r.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", err
	}
	return obj.GetResourceVersion(), nil
}
