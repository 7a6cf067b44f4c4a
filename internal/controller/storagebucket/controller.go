package storagebucket

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// +kubebuilder:rbac:groups=bucketkeeper.io,resources=storagebuckets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=bucketkeeper.io,resources=storagebuckets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=bucketkeeper.io,resources=storagebuckets/finalizers,verbs=update
// +kubebuilder:rbac:groups=bucketkeeper.io,resources=objectstores,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler keeps a bucket on an S3-compatible store in line with a
// StorageBucket: it provisions the bucket, applies its configuration, writes the
// connection Secret and carries out the deletion policy.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
	Stores   *stores.Registry
	Clock    clock.PassiveClock
	// ClusterID goes into every bucket's ownership tags, so that several clusters
	// sharing a store never touch each other's buckets (see bkv1.TagCluster).
	ClusterID string
	// SyncInterval is how often bucket and configuration are re-read from the store to
	// correct drift made outside the operator.
	SyncInterval time.Duration
	// OnStatusWrite is called after every status write (metrics); may be nil.
	OnStatusWrite func(kind string)
	// ReconcileTimeout bounds each reconcile as a whole (zero: no bound), on top of
	// the per-call S3 timeout: whatever waits, a worker is back within this time.
	ReconcileTimeout time.Duration
	// CreateSettleTime is how long after a CreateBucket went unanswered the store may
	// still carry it out (creates.go); zero means defaults.CreateSettleTime.
	CreateSettleTime time.Duration

	// Prober runs and schedules health probes; nil disables probing.
	Prober *Prober

	// Mover runs the passes of moves between stores (spec.move); nil refuses moves.
	Mover mover.Runner
	// Access hands out the IAM drivers through which a move's freeze narrows the keys
	// of a store whose bucket policies bind none (move_freezer.go); nil freezes by the
	// bucket policy alone.
	Access *stores.AccessProviders
	// OnMoveProgress is told a running move's status after each look at its mover,
	// OnMoveEnd its end and, for one that cut over, its write pause (metrics); may be
	// nil.
	OnMoveProgress func(namespace, name string, m *bkv1.MoveStatus)
	OnMoveEnd      func(namespace, name string, pause *time.Duration)
	// MaxConcurrentMoves bounds the moves this process runs at once, whatever their
	// stores (zero: defaults.MaxConcurrentMoves); CancelledMoveKeep is how long a
	// cancelled move keeps its target to resume (zero: defaults.CancelledMoveTargetKeep).
	MaxConcurrentMoves int
	CancelledMoveKeep  time.Duration

	// OnDeletionBlocked is told when a StorageBucket's deletion starts waiting for
	// locked object versions, and (nil since) when it stops (metrics); may be nil.
	OnDeletionBlocked func(key types.NamespacedName, since *time.Time)

	synced syncMemo
	names  nameLocks
	purges purgeMemo
	passes passMemo
	// creates: until when the CreateBuckets this process saw go unanswered may land.
	creates createMemo
	// blocked holds the keys this reconciler reported to OnDeletionBlocked.
	blocked sync.Map
	// moveTargets: the target bucket each move (by ID) found ready in this process;
	// moveTargetsRemoved: when this process deleted the target of a cancelled move;
	// moveCreates: until when the target CreateBuckets this process sent for a move
	// may land (move_create.go).
	moveTargets, moveTargetsRemoved, moveCreates sync.Map
	// queue admits moves to their stores' slots (move_queue.go).
	queue moveQueue
}

// bucketScope carries what the sub-reconcilers of one StorageBucket share.
type bucketScope struct {
	sb      *bkv1.StorageBucket
	patcher *reconcile.StatusPatcher
	store   *bkv1.ObjectStore
	s3      s3.Client
	bucket  string
	region  string
	// quota is the quota the guardrails accepted (desiredQuota); the configuration step
	// adds the store's admin API to it.
	quota quotaPlan
	// policy is the spec's bucket policy as the guardrails checked it, in its canonical
	// form ("" for none): what the configuration step sends the store, never the
	// tenant's own bytes. reconcileGuardrails sets it; nothing before it may read it.
	policy string
	// syncing: bucket and configuration are checked against the store in this pass
	// (see syncDue); otherwise the last verdict stands.
	syncing bool
	// adoptOnly: the explicit bucket name lies outside the namespace's lane and may
	// only adopt an existing bucket, never create one (checkNameLane).
	adoptOnly bool
	// created: the bucket was created in this pass, whose creation event already
	// tells the story; the configuration applied to it is not announced separately.
	created bool
	// owner is what the bucket's ownership tags must say (reconcileStore).
	owner owner
	// dest is where the bucket should live (reconcileStore, retire.go): the store the
	// spec names, or its successor where it retires.
	dest destination
	// probeWake is when the probe scheduler will wake the bucket next (zero: it will
	// not), as reconcileAvailability scheduled it.
	probeWake time.Time
	// secretVersion, accessVersion and appCredentialsVersion are the resourceVersions
	// of the connection Secret, the implicit BucketAccess and the application
	// credentials Secret as this pass left or read them ("" for none): what a later
	// probe compares to know that nothing changed since (see probeOnly).
	secretVersion, accessVersion, appCredentialsVersion string
}

// Reconcile is level-triggered: it re-reads the StorageBucket, its store and the bucket
// every time and never depends on which event woke it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcile.Run(ctx, r.Client, req, &bkv1.StorageBucket{}, reconcile.Lifecycle[*bkv1.StorageBucket]{
		Kind:      "StorageBucket",
		Status:    func(sb *bkv1.StorageBucket) any { return sb.Status },
		OnWrite:   r.OnStatusWrite,
		Vanished:  r.vanished,
		Gone:      r.forget,
		Deleting:  r.reconcileDelete,
		Suspended: suspended,
		Suspend:   r.reconcileSuspended,
		Normal:    r.reconcileNormal,
	})
}

// forget drops what this process remembers of a StorageBucket that no longer exists:
// its last sync, its last pass, its probe state, its unanswered creates and what the
// move queue decided of it.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.synced.forget(key)
	r.passes.forget(key)
	r.Prober.forget(key)
	r.creates.forget(key)
	r.unblocked(key)
	r.forgetMove(context.Background(), key)
}

// unblocked tells OnDeletionBlocked that a StorageBucket whose deletion it was told
// about waits no more (its deletion is done, or it is gone).
func (r *Reconciler) unblocked(key types.NamespacedName) {
	if _, was := r.blocked.LoadAndDelete(key); was && r.OnDeletionBlocked != nil {
		r.OnDeletionBlocked(key, nil)
	}
}

// suspended says whether the claim asks for no reconciliation (spec.suspend).
func suspended(sb *bkv1.StorageBucket) bool { return sb.Spec.Suspend }

// reconcileSuspended stops probing the bucket and records the suspension; the
// guardrails still hold (checkSuspended).
func (r *Reconciler) reconcileSuspended(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher) (ctrl.Result, error) {
	log.FromContext(ctx).V(1).Info("reconciliation is suspended")
	r.passes.forget(client.ObjectKeyFromObject(sb))
	r.Prober.forget(client.ObjectKeyFromObject(sb))
	markSuspended(sb)
	return r.checkSuspended(ctx, &bucketScope{sb: sb, patcher: patcher})
}

// reconcileNormal runs the sub-reconcilers in order; each needs what the one before
// established. The summary conditions are computed from whatever they reached.
func (r *Reconciler) reconcileNormal(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher) (ctrl.Result, error) {
	if result, done := r.probeOnly(ctx, sb, patcher); done {
		return result, nil // nothing but the probe can have changed (probeonly.go)
	}
	if reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionSuspended) != nil {
		// Resumed: the Reconciling=False of the suspension no longer holds; this pass
		// sets Ready, Reconciling and Stalled afresh.
		reconcile.RemoveCondition(&sb.Status.Conditions, bkv1.ConditionSuspended)
		reconcile.RemoveCondition(&sb.Status.Conditions, bkv1.ConditionReconciling)
	}
	scope := &bucketScope{sb: sb, patcher: patcher}
	if meta := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionAvailable); meta == nil {
		reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionAvailable, metav1.ConditionUnknown, bkv1.ReasonNotProbed, "the bucket has not been probed yet")
	}

	steps := []struct {
		condition, doing string
		run              func(context.Context, *bucketScope) error
	}{
		{bkv1.ConditionProvisioned, "checking the ObjectStore", r.reconcileStore},
		{bkv1.ConditionReady, "checking the ObjectStore's guardrails", r.reconcileGuardrails},
		{bkv1.ConditionReady, "holding the writes of a bucket that cuts over to another store", r.holdWritesForMove},
		{bkv1.ConditionReady, "deciding whether the bucket is due a sync", r.decideSync},
		{bkv1.ConditionProvisioned, "provisioning the bucket", r.reconcileBucket},
		{bkv1.ConditionConfigured, "configuring the bucket", r.reconcileConfiguration},
		{bkv1.ConditionReady, "writing the connection Secret", r.reconcileConnectionSecret},
		{bkv1.ConditionReady, "granting the implicit access", r.reconcileImplicitAccess},
	}
	var failure *reconcile.StepError
	failedCondition := ""
	for _, step := range steps {
		err := step.run(ctx, scope)
		if err == nil {
			continue
		}
		failure, failedCondition = reconcile.AsStepError(err, step.doing), step.condition
		if failure.Reason != bkv1.ReasonNotSupportedByStore {
			break // later steps need what this one failed to establish
		}
		// Otherwise report it, but let the connection Secret converge too.
	}

	probeRequeue := r.reconcileAvailability(ctx, scope, patcher, failure)
	result, err := r.summarize(ctx, sb, patcher, failedCondition, failure)
	if failure == nil {
		var step moveStep
		if scope.moves() || hasSourceDue(sb) || sb.Status.Move.KeptTarget() {
			// Only a bucket reconciled in full on its home store moves (move.go).
			step = r.reconcileMove(ctx, scope)
			r.reportMove(scope, step)
			if step.requeue > 0 && step.requeue < result.RequeueAfter {
				result.RequeueAfter = step.requeue
			}
		}
		reportRetirement(scope, step) // what a retirement of its store does with it (retire.go)
	}
	r.rememberPass(scope, patcher, failure)
	if probeRequeue > 0 && (result.RequeueAfter == 0 || probeRequeue < result.RequeueAfter) {
		result.RequeueAfter = probeRequeue
	}
	if next := r.syncRequeue(sb); next > 0 && next < result.RequeueAfter {
		result.RequeueAfter = next // a sync put at its slot after a restart (syncDue)
	}
	return withoutCoveredTimer(result, r.Clock.Now(), scope.probeWake), err
}

// summarize sets Ready, Reconciling and Stalled from the outcome, kstatus-style: Ready
// is the verdict, Reconciling=True while retrying, Stalled=True when a human must act.
// observedGeneration moves only when the generation got a final verdict.
func (r *Reconciler) summarize(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher, failed string, err *reconcile.StepError) (ctrl.Result, error) {
	conds := &sb.Status.Conditions
	gen := sb.Generation
	if err == nil {
		reconcile.SetCondition(conds, gen, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady, fmt.Sprintf("bucket %s is provisioned and configured", sb.Status.BucketName))
		reconcile.RemoveCondition(conds, bkv1.ConditionReconciling)
		reconcile.RemoveCondition(conds, bkv1.ConditionStalled)
		sb.Status.ObservedGeneration = gen
		return ctrl.Result{RequeueAfter: r.SyncInterval}, nil
	}

	if (err.Reason == bkv1.ReasonStoreUnreachable || err.KeepsVerdict) && lastVerified(sb) {
		// A store outage, or a store edit not checked yet, says nothing new about a
		// bucket that was verified: Ready keeps that verdict, and the ObjectStore's own
		// conditions carry the outage (with Available=Unknown, reconcileAvailability).
		// Flipping Ready here would turn every application's health red, with two
		// status writes per bucket, for a blip.
		if err.Waiting {
			return ctrl.Result{RequeueAfter: r.SyncInterval}, nil // the store's watch wakes us
		}
		log.FromContext(ctx).Info("store unreachable; will retry", "error", err.Error())
		return ctrl.Result{}, err
	}
	if failed != "" && failed != bkv1.ConditionReady && !err.Waiting {
		reconcile.SetCondition(conds, gen, failed, metav1.ConditionFalse, err.Reason, err.Message)
	}
	return reconcile.SummarizeFailure(ctx, conds, gen, &sb.Status.ObservedGeneration, err, r.SyncInterval, func() {
		patcher.AfterWrite(func() {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, err.Reason, "Reconcile", "%s", err.Message)
		})
	})
}

// markSuspended records the suspension the way kstatus reads it: Suspended=True says
// why nothing happens, Reconciling=False that nothing is in progress, and Ready, the
// other conditions and Stalled keep the last verdict, which still describes the bucket
// as it was left. observedGeneration moves on: the operator has seen this spec and its
// answer to it is to do nothing, so kstatus does not wait for a reconcile that never
// comes.
func markSuspended(sb *bkv1.StorageBucket) {
	const msg = "reconciliation and probing are suspended (spec.suspend); the other conditions are as last verified"
	conds, gen := &sb.Status.Conditions, sb.Generation
	reconcile.SetCondition(conds, gen, bkv1.ConditionSuspended, metav1.ConditionTrue, bkv1.ReasonSuspended, msg)
	reconcile.SetCondition(conds, gen, bkv1.ConditionReconciling, metav1.ConditionFalse, bkv1.ReasonSuspended, msg)
	sb.Status.ObservedGeneration = gen
}

// lastVerified says whether the bucket has a verdict for its current spec: it was
// provisioned and the current generation reached a final Ready verdict. Only such a
// verdict outlives a store outage; a bucket never provisioned, or whose spec changed
// since, keeps waiting with Ready=False.
func lastVerified(sb *bkv1.StorageBucket) bool {
	ready := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionReady)
	return reconcile.ConditionIsTrue(sb.Status.Conditions, bkv1.ConditionProvisioned) &&
		sb.Status.ObservedGeneration == sb.Generation &&
		ready != nil && ready.ObservedGeneration == sb.Generation
}
