package bucketaccess

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/memo"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// +kubebuilder:rbac:groups=bucketkeeper.io,resources=bucketaccesses,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=bucketkeeper.io,resources=bucketaccesses/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=bucketkeeper.io,resources=bucketaccesses/finalizers,verbs=update

// Reconciler gives each BucketAccess an IAM user on its buckets' store,
// an inline policy over those buckets and one key, written to the access's Secret;
// it rotates the key without downtime and revokes everything when the access goes.
//
// Everything it needs to resume after a crash is on the store (ListAccessKeys) and
// in the Secret (the current key); its status and memory only make it faster.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
	Stores   *stores.Registry
	Access   *stores.AccessProviders
	Clock    clock.PassiveClock
	// ClusterID goes into every IAM user name, so that several clusters can share an
	// account and each knows its users by name.
	ClusterID string
	// KeyGrace is how long a replaced key stays valid (default defaults.AccessKeyGrace).
	KeyGrace time.Duration
	// SyncInterval is how often an access is re-checked against the store.
	SyncInterval time.Duration
	// OnStatusWrite is called after every status write (metrics); may be nil.
	OnStatusWrite func(kind string)
	// OnReady is told each access's Ready verdict after a pass, and nil once the access
	// is being deleted or gone (metrics); may be nil.
	OnReady func(key types.NamespacedName, ready *bool)

	pending memo.Map[types.UID, *pendingKey] // keys created and not yet in the Secret
	// applied is the store and policy document last written per access
	// (store + "\n" + document; the document is empty where its policy was deleted).
	applied memo.Map[types.UID, string]
	// roles is the ARN of the role last written per keyless access (roles.go).
	roles memo.Map[types.UID, string]
}

// Forget drops what this process remembers of an access's identity (the policy it
// last wrote, a key being verified): the access collector deleted the user, so the
// next reconcile must create it again rather than trust that memory.
func (r *Reconciler) Forget(uid types.UID) {
	r.pending.Delete(uid)
	r.applied.Delete(uid)
	r.roles.Delete(uid)
}

func (r *Reconciler) forgetApplied(uid types.UID) { r.applied.Delete(uid) }

// accessScope carries what the steps of one reconcile share.
type accessScope struct {
	ba     *bkv1.BucketAccess
	store  *bkv1.ObjectStore
	driver iam.Driver
	user   string
	grants []iam.Grant
	names  []string // "<StorageBucket>=<bucket>" in spec order
	// requeue is the earliest time-driven step ahead (grace end, rotation due).
	requeue time.Duration
}

func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcile.Run(ctx, r.Client, req, &bkv1.BucketAccess{}, reconcile.Lifecycle[*bkv1.BucketAccess]{
		Kind:    "BucketAccess",
		Status:  func(ba *bkv1.BucketAccess) any { return ba.Status },
		OnWrite: r.OnStatusWrite,
		Gone:    func(key types.NamespacedName) { r.reportReady(key, nil) },
		Deleting: func(ctx context.Context, ba *bkv1.BucketAccess, p *reconcile.StatusPatcher) (ctrl.Result, error) {
			r.reportReady(client.ObjectKeyFromObject(ba), nil)
			return r.reconcileDelete(ctx, ba, p)
		},
		Normal: func(ctx context.Context, ba *bkv1.BucketAccess, p *reconcile.StatusPatcher) (ctrl.Result, error) {
			res, err := r.reconcileNormal(ctx, ba, p)
			ready := reconcile.ConditionIsTrue(ba.Status.Conditions, bkv1.ConditionReady)
			r.reportReady(client.ObjectKeyFromObject(ba), &ready)
			return res, err
		},
	})
}

// reportReady tells OnReady an access's verdict: an access not Ready for long is an
// application without its key (the BucketkeeperAccessNotReady alert).
func (r *Reconciler) reportReady(key types.NamespacedName, ready *bool) {
	if r.OnReady != nil {
		r.OnReady(key, ready)
	}
}

// reconcileNormal runs the steps in order; each needs what the one before established.
func (r *Reconciler) reconcileNormal(ctx context.Context, ba *bkv1.BucketAccess, patcher *reconcile.StatusPatcher) (ctrl.Result, error) {
	scope := &accessScope{ba: ba}
	steps := []struct {
		doing string
		run   func(context.Context, *accessScope) error
	}{
		{"resolving the buckets", r.resolveBuckets},
		{"creating the identity and its policy", r.reconcileIdentity},
		{"issuing the key", r.reconcileKeys},
		{"removing the Secrets of an earlier secretName", r.pruneEarlierSecrets},
	}
	if keyless(ba) {
		steps[1].doing, steps[1].run = "creating the role and its policies", r.reconcileRole
		steps[2].doing, steps[2].run = "writing the Secret", r.writeKeylessSecret
	}
	for _, step := range steps {
		if err := step.run(ctx, scope); err != nil {
			return r.summarize(ctx, ba, patcher, asAccessStepError(err, step.doing))
		}
	}
	res, err := r.summarize(ctx, ba, patcher, nil)
	if scope.requeue > 0 && scope.requeue < res.RequeueAfter {
		res.RequeueAfter = scope.requeue
	}
	return res, err
}

// resolveBuckets reads the StorageBuckets the access names (in its own namespace: names
// are looked up there) and decides what its key may reach now. A key only ever reaches
// the buckets the current spec names that are Ready on the one store they are all on:
//   - one of them missing, being deleted or refused by its store's guardrails, or the
//     buckets on several stores: the access grants nowhere and its key is revoked
//     (revokeForGoneBucket), wherever that bucket stands in the spec;
//   - some not Ready (yet, or any more): the identity is narrowed to the Ready ones
//     (narrowIdentity) before the access waits for the others;
//   - all Ready: the identity on a store the access left loses its policy, and the
//     scope is set for the identity and key steps on the buckets' store.
func (r *Reconciler) resolveBuckets(ctx context.Context, s *accessScope) error {
	storeName := ""
	var notReady *reconcile.StepError
	for _, g := range s.ba.Spec.Buckets {
		sb := &bkv1.StorageBucket{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: s.ba.Namespace, Name: g.Name}, sb); err != nil {
			if apierrors.IsNotFound(err) {
				return r.revokeForGoneBucket(ctx, s.ba, reconcile.Waitingf(bkv1.ReasonBucketNotReady, "StorageBucket %q does not exist in namespace %s", g.Name, s.ba.Namespace))
			}
			return err
		}
		if !sb.DeletionTimestamp.IsZero() {
			return r.revokeForGoneBucket(ctx, s.ba, reconcile.Waitingf(bkv1.ReasonBucketNotReady, "StorageBucket %q is being deleted", g.Name))
		}
		if reason := guardrailRefusal(sb); reason != "" {
			return r.revokeForGoneBucket(ctx, s.ba, reconcile.Terminalf(bkv1.ReasonBucketRefused,
				"StorageBucket %q is refused by its store's guardrails (%s): the key is revoked and a new one is issued once the bucket is Ready again", g.Name, reason))
		}
		switch {
		case storeName == "":
			storeName = sb.HomeStore()
		case sb.HomeStore() != storeName:
			return r.revokeForGoneBucket(ctx, s.ba, reconcile.Terminalf(bkv1.ReasonStoreMismatch,
				"StorageBuckets %q and %q are on different ObjectStores (%s, %s): one BucketAccess spans one store", s.ba.Spec.Buckets[0].Name, g.Name, storeName, sb.HomeStore()))
		}
		if !reconcile.ConditionIsTrue(sb.Status.Conditions, bkv1.ConditionReady) || sb.Status.BucketName == "" {
			if notReady == nil {
				notReady = reconcile.Waitingf(bkv1.ReasonBucketNotReady, "waiting for StorageBucket %q to be Ready; meanwhile the key reaches only the Ready buckets", g.Name)
			}
			continue
		}
		mode := iam.ReadWrite
		if g.Mode == bkv1.AccessReadOnly {
			mode = iam.ReadOnly
		}
		s.grants = append(s.grants, iam.Grant{Bucket: sb.Status.BucketName, Mode: mode, ObjectLock: sb.Spec.ObjectLock != nil || sb.Status.ObjectLock != nil,
			Frozen: sb.WritesFrozen()})
		s.names = append(s.names, g.Name+"="+sb.Status.BucketName)
	}
	if notReady != nil {
		return r.narrowThenWait(ctx, s.ba, storeName, s.grants, notReady)
	}
	store := &bkv1.ObjectStore{}
	if err := r.Get(ctx, types.NamespacedName{Name: storeName}, store); err != nil {
		if apierrors.IsNotFound(err) {
			return r.narrowThenWait(ctx, s.ba, storeName, nil, reconcile.Waitingf(bkv1.ReasonObjectStoreNotFound, "ObjectStore %q not found", storeName))
		}
		return err
	}
	if issuedOn := s.ba.Status.ObjectStore; issuedOn != "" && issuedOn != storeName {
		if err := r.leaveStore(ctx, s.ba, storeName); err != nil {
			return err
		}
	}
	s.store = store
	driver, err := r.Access.DriverFor(ctx, store)
	if err != nil {
		return err
	}
	s.driver = driver
	s.user = accessIdentity(r.ClusterID, s.ba)
	s.ba.Status.ObjectStore, s.ba.Status.IdentityName = store.Name, s.user
	return nil
}

// accessIdentity is the IAM user of an access: the name iam.UserName derives, or
// the legacy hashed name (iam.LegacyUserName) for an access whose status records
// that an earlier version issued its key under it: renaming the user would take the
// key its pods use away without a grace period.
func accessIdentity(clusterID string, ba *bkv1.BucketAccess) string {
	if legacy := iam.LegacyUserName(clusterID, string(ba.UID)); legacy != "" && ba.Status.IdentityName == legacy {
		return legacy
	}
	return iam.UserName(clusterID, string(ba.UID))
}

// revokeForGoneBucket: a StorageBucket the access names is gone or going, or refused
// by its store's guardrails, so the key issued for it is revoked (user, policy and
// keys deleted, Secret deleted: a Secret without a key would only fail later and less
// clearly) even if the bucket itself is retained on the store. A new key is issued
// once every bucket is Ready again. Then it reports why. A keyless access's role is
// revoked so too when its store's issuer turns out shared with another cluster
// (reconcileRole).
func (r *Reconciler) revokeForGoneBucket(ctx context.Context, ba *bkv1.BucketAccess, why *reconcile.StepError) error {
	if !r.mayHoldIdentity(ba) {
		return why // nothing was issued
	}
	store := &bkv1.ObjectStore{}
	if err := r.Get(ctx, types.NamespacedName{Name: ba.Status.ObjectStore}, store); err != nil {
		if apierrors.IsNotFound(err) {
			return why // the store went with everything on it
		}
		return err
	}
	if keyless(ba) {
		if err := r.deleteRole(ctx, store, ba); err != nil {
			return err
		}
	} else {
		driver, err := r.Access.DriverFor(ctx, store)
		if err != nil {
			return err
		}
		if err := driver.DeleteUser(ctx, accessIdentity(r.ClusterID, ba)); err != nil {
			return err
		}
	}
	if err := r.deleteAccessSecret(ctx, ba); err != nil {
		return err
	}
	r.Forget(ba.UID)
	what := "key " + ba.Status.AccessKeyID
	if keyless(ba) {
		what = "role " + ba.Status.RoleARN
	}
	r.Recorder.Eventf(ba, nil, corev1.EventTypeNormal, bkv1.ReasonRevoking, "Revoke", "revoked %s: %s", what, why.Message)
	ba.Status.AccessKeyID, ba.Status.KeyCreatedAt, ba.Status.RoleARN = "", nil, ""
	ba.Status.Rotation = bkv1.RotationStatus{LastHandledRequest: ba.Status.Rotation.LastHandledRequest}
	return why
}

// reconcileIdentity ensures the user and writes its policy when it differs from the
// one this process last wrote (after a restart: once).
func (r *Reconciler) reconcileIdentity(ctx context.Context, s *accessScope) error {
	doc, err := policyMemo(s.grants)
	if err != nil {
		return reconcile.Terminalf(bkv1.ReasonConfigFailed, "%v", err)
	}
	if r.appliedOf(s.ba.UID) == s.store.Name+"\n"+doc {
		return nil
	}
	if err := s.driver.EnsureUser(ctx, s.user); err != nil {
		return err
	}
	if err := s.driver.PutPolicy(ctx, s.user, s.grants); err != nil {
		return err
	}
	r.setApplied(s.ba.UID, s.store.Name+"\n"+doc)
	return nil
}

// reconcileDelete revokes the credentials: keys, policy and user go before the
// finalizer does, so a deleted access leaves no working key behind.
func (r *Reconciler) reconcileDelete(ctx context.Context, ba *bkv1.BucketAccess, _ *reconcile.StatusPatcher) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(ba, bkv1.Finalizer) {
		return ctrl.Result{}, nil
	}
	storeName := ba.Status.ObjectStore
	if storeName == "" && len(ba.Spec.Buckets) > 0 {
		sb := &bkv1.StorageBucket{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: ba.Namespace, Name: ba.Spec.Buckets[0].Name}, sb); err == nil {
			storeName = sb.HomeStore()
		}
	}
	store := &bkv1.ObjectStore{}
	err := r.Get(ctx, types.NamespacedName{Name: storeName}, store)
	switch {
	case storeName == "" || apierrors.IsNotFound(err):
		// Nothing was created, or the store is gone with everything on it.
		log.FromContext(ctx).Info("no store to revoke the credentials on", "store", storeName)
	case err != nil:
		return ctrl.Result{}, err
	case stores.AccessProviderOf(store) == bkv1.AccessProviderIAM && keyless(ba):
		if err := r.deleteRole(ctx, store, ba); err != nil {
			reconcile.SetCondition(&ba.Status.Conditions, ba.Generation, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonRevoking, fmt.Sprintf("deleting the role: %v", err))
			return ctrl.Result{}, err
		}
		r.Recorder.Eventf(ba, nil, corev1.EventTypeNormal, bkv1.ReasonRevoking, "Delete", "deleted role %s and its policy", accessIdentity(r.ClusterID, ba))
	case stores.AccessProviderOf(store) == bkv1.AccessProviderIAM:
		driver, err := r.Access.DriverFor(ctx, store)
		if err != nil {
			return ctrl.Result{}, err
		}
		user := accessIdentity(r.ClusterID, ba)
		if err := driver.DeleteUser(ctx, user); err != nil {
			reconcile.SetCondition(&ba.Status.Conditions, ba.Generation, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonRevoking, fmt.Sprintf("revoking the credentials: %v", err))
			return ctrl.Result{}, err
		}
		r.Recorder.Eventf(ba, nil, corev1.EventTypeNormal, bkv1.ReasonRevoking, "Delete", "deleted identity %s, its policy and keys", user)
	}
	if err := r.deleteAccessSecret(ctx, ba); err != nil {
		return ctrl.Result{}, err
	}
	r.Forget(ba.UID)
	err = reconcile.PatchMetadata(ctx, r.Client, ba, func(o *bkv1.BucketAccess) { controllerutil.RemoveFinalizer(o, bkv1.Finalizer) })
	return ctrl.Result{}, client.IgnoreNotFound(err)
}

// summarize sets Ready, Reconciling and Stalled kstatus-style.
func (r *Reconciler) summarize(ctx context.Context, ba *bkv1.BucketAccess, patcher *reconcile.StatusPatcher, err *reconcile.StepError) (ctrl.Result, error) {
	conds, gen := &ba.Status.Conditions, ba.Generation
	if err == nil {
		msg := fmt.Sprintf("key %s of %s is in Secret %s", ba.Status.AccessKeyID, ba.Status.IdentityName, ba.Spec.SecretName)
		if keyless(ba) {
			msg = fmt.Sprintf("role %s admits the tokens of ServiceAccount %s for audience %s; Secret %s holds its settings, and no key",
				ba.Status.RoleARN, ba.Spec.ServiceAccountName, ba.Status.TokenAudience, ba.Spec.SecretName)
		}
		reconcile.SetCondition(conds, gen, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady, msg)
		if ba.Status.Rotation.State == bkv1.RotationIdle {
			reconcile.RemoveCondition(conds, bkv1.ConditionReconciling)
		} else {
			reconcile.SetCondition(conds, gen, bkv1.ConditionReconciling, metav1.ConditionTrue, bkv1.ReasonRotating, "rotating the key: "+string(ba.Status.Rotation.State))
		}
		reconcile.RemoveCondition(conds, bkv1.ConditionStalled)
		ba.Status.ObservedGeneration = gen
		return ctrl.Result{RequeueAfter: r.SyncInterval}, nil
	}
	return reconcile.SummarizeFailure(ctx, conds, gen, &ba.Status.ObservedGeneration, err, r.SyncInterval, func() {
		patcher.AfterWrite(func() {
			r.Recorder.Eventf(ba, nil, corev1.EventTypeWarning, err.Reason, "Reconcile", "%s", err.Message)
		})
	})
}

// asAccessStepError maps IAM errors to condition reasons; anything else as for
// StorageBuckets.
func asAccessStepError(err error, doing string) *reconcile.StepError {
	if iam.KindOf(err) == iam.KindUnknown {
		return reconcile.AsStepError(err, doing)
	}
	out := &reconcile.StepError{Message: fmt.Sprintf("%s: %v", doing, err), Err: err}
	switch iam.KindOf(err) {
	case iam.KindAccessDenied:
		out.Reason, out.Terminal = bkv1.ReasonAccessDenied, true
	case iam.KindInvalidCredentials:
		out.Reason, out.Terminal = bkv1.ReasonCredentialsInvalid, true
	case iam.KindInvalid, iam.KindNotImplemented:
		out.Reason, out.Terminal = bkv1.ReasonConfigFailed, true
	case iam.KindThrottled:
		out.Reason = bkv1.ReasonThrottled
	default:
		out.Reason = bkv1.ReasonAccessProviderUnavailable
	}
	return out
}
