package storagebucket

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;create;update;patch;delete;deletecollection,namespace=bucketkeeper-system
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;create;delete,namespace=bucketkeeper-system

// A move takes a bucket from the store it lives on (status.objectStore, the home) to
// the one spec.objectStoreRef names, while its applications keep using it. The
// reconcile loop only orchestrates: the mover (mover.Runner) copies, and every pass
// here reads where the move is from status.move and the mover's checkpoints, never from
// the event that woke it, so a restarted operator carries on where the last one was:
//
//	Queued       the move waits for a slot of its stores and of the operator
//	             (move_queue.go); nothing is copied yet.
//	Planning     the source is listed once: its size (checked against the target's
//	             quota before anything is created there) and the shards' boundaries;
//	             the settings it has that the spec does not declare wait for a
//	             choice, Carry or Drop (move_undeclared.go).
//	Copying      the target bucket is created, tagged as this claim's and configured
//	             for versions; the first copy pass runs.
//	CatchingUp   further passes copy what the applications changed meanwhile, until
//	             a pass finds at most MoveCutoverChanges changes.
//	CuttingOver  the source's object writes are denied by its bucket policy (every
//	             key, the claim's and its BucketAccesses'); a final pass copies the
//	             last changes and verifies both listings equal.
//	Switching    status.objectStore names the target: the next pass provisions,
//	             configures and writes the connection Secret for it, and every
//	             BucketAccess moves its identity there (new key, old one revoked).
//	Done         the source is tagged as moved and stays frozen; the checkpoints go.
//
// Setting spec.objectStoreRef back before Switching aborts: the mover stops, the
// source's writes are allowed again, and the target bucket is emptied and deleted, at
// once or, for a move past its plan, after CancelledMoveKeep (move_keep.go): asked
// again before then, the same move resumes from what it verified there.

// moveStep is what one pass of a move decided: when to look again, and whether it is
// refused or stuck (a condition of its own, which leaves Ready alone: the bucket still
// serves from its home while the move cannot go on).
type moveStep struct {
	requeue time.Duration
	err     *reconcile.StepError
}

// moving says whether the claim may want its bucket on another store, or a move of it
// is unfinished: what a pass can tell without reading a store (the probe's short cut
// takes no such claim). A bucket a retirement took from the store its spec names is
// where it should be: a later change of that store's retirement (another successor)
// is seen by the next full pass, at the latest the sync's. A full pass decides by its
// destination (moves).
func moving(sb *bkv1.StorageBucket) bool {
	named, home := sb.Spec.ObjectStoreRef.Name, sb.HomeStore()
	retired := sb.Status.Retirement != nil && sb.Status.Retirement.From == named && sb.Status.Retirement.Into == home
	return (named != home && !retired) || !sb.Status.Move.Terminal()
}

// moves says whether the bucket should live on another store than its home (the
// destination reconcileStore found), or a move of it is unfinished.
func (s *bucketScope) moves() bool {
	return s.dest.store != s.sb.HomeStore() || !s.sb.Status.Move.Terminal()
}

// sourceDue says whether a finished move's source is yet to be deleted
// (spec.move.deleteSourceAfter), and from when.
func sourceDue(sb *bkv1.StorageBucket) (time.Time, bool) {
	m := sb.Status.Move
	if m == nil || m.Phase != bkv1.MoveDone || m.SourceDeleted || m.SwitchedAt == nil ||
		sb.Spec.Move == nil || sb.Spec.Move.DeleteSourceAfter == nil || sb.HomeStore() != m.To {
		return time.Time{}, false
	}
	return m.SwitchedAt.Add(sb.Spec.Move.DeleteSourceAfter.Duration), true
}

// reconcileMove runs after the bucket was reconciled on its home store: the pass that
// moves it there is visible here, phase by phase.
func (r *Reconciler) reconcileMove(ctx context.Context, scope *bucketScope) moveStep {
	sb := scope.sb
	home, want := scope.store.Name, scope.dest.store
	m := sb.Status.Move
	switch {
	case m != nil && m.Phase == bkv1.MoveSwitching && home == m.To:
		return r.finishMove(ctx, scope)
	case home == want && hasSourceDue(sb):
		return r.deleteSource(ctx, scope)
	case home == want && m.KeptTarget():
		return r.keepTarget(ctx, scope)
	case home == want && m.Terminal():
		return moveStep{}
	case !m.Terminal() && (home == want || m.To != want):
		why := fmt.Sprintf("spec.objectStoreRef names %s now", want)
		if d := scope.dest; d.retirement != nil {
			why = fmt.Sprintf("the retirement of ObjectStore %s takes the bucket to %s", d.retirement.From, want)
		}
		return r.abortMove(ctx, scope, why)
	}
	if r.Mover == nil {
		return moveStep{err: reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "this operator runs without a mover (--mover): it cannot move buckets between stores")}
	}
	if m.KeptTarget() && !r.resumable(m, home, want) {
		if done, err := r.dropKeptTarget(ctx, sb, m); err != nil || !done {
			return moveWait(m, err)
		}
	}
	if m.Terminal() {
		m = r.startMove(sb, home, want)
	}
	target, err := r.moveTarget(ctx, scope, m)
	if err != nil {
		return moveFailed(m, err)
	}
	// Every status write of the move says that it runs, those written in the middle
	// of a pass (ensureMoveTarget's record of its target) too: the pass's summary
	// took Reconciling off when the bucket on its home store was found Ready.
	r.reportMove(scope, moveStep{})
	if m.Phase == bkv1.MoveQueued {
		if step, wait := r.cutoverWait(ctx, scope, m); wait {
			return step // writes went on under the last freeze: no slot taken before its time
		}
		if err := beyondQuota(sb, target, m); err != nil && m.Pass < 2 {
			return moveStep{err: err} // refused again, by the plan it made before; no slot taken
		}
		if scope.dest.paused() {
			// A paused retirement starts no move; the store's change wakes it.
			m.Message = fmt.Sprintf("held: the retirement of ObjectStore %s is paused (spec.retire.paused)", scope.dest.retirement.From)
			return moveStep{}
		}
		if step, wait := r.admitMove(ctx, scope, target, m); wait {
			return step
		}
	} else {
		r.holdMoveShares(ctx, m)
	}
	switch m.Phase {
	case bkv1.MovePlanning:
		return r.planMove(ctx, scope, target, m)
	case bkv1.MoveCopying, bkv1.MoveCatchingUp:
		return r.copyPass(ctx, scope, target, m)
	case bkv1.MoveCuttingOver:
		return r.finalPass(ctx, scope, target, m)
	}
	return moveStep{err: reconcile.Terminalf(bkv1.ReasonMoveFailed, "status.move has an unknown phase %q", m.Phase)}
}

// startMove records a move in status, queued for its slot (admitMove): a new one,
// whose ID names its checkpoints, or the cancelled one whose target is still kept
// (resumable), with its ID, checkpoints and shards.
func (r *Reconciler) startMove(sb *bkv1.StorageBucket, from, to string) *bkv1.MoveStatus {
	now := metav1.NewTime(r.Clock.Now()).Rfc3339Copy()
	if old := sb.Status.Move; r.resumable(old, from, to) {
		old.Phase, old.StartedAt, old.TargetKeptOn, old.TargetKeptUntil = bkv1.MoveQueued, &now, "", nil
		old.CutoverAttempts, old.CutoverRetryAt = 0, nil
		old.Message = "waiting for a move slot"
		r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonMoving, "Move", "moving bucket %s from ObjectStore %s to %s again: the cancelled move resumes with what it verified there", sb.Status.BucketName, from, to)
		return old
	}
	attempt := 1
	if old := sb.Status.Move; old != nil {
		if _, n, ok := strings.Cut(old.ID, "-"); ok {
			attempt, _ = strconv.Atoi(n)
			attempt++
		}
	}
	m := &bkv1.MoveStatus{
		ID:   strings.ReplaceAll(string(sb.UID), "-", "") + "-" + strconv.Itoa(attempt%1000),
		From: from, To: to, Phase: bkv1.MoveQueued, Pass: 1, StartedAt: &now,
		Message: "waiting for a move slot",
	}
	sb.Status.Move = m
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonMoving, "Move", "moving bucket %s from ObjectStore %s to %s", sb.Status.BucketName, from, to)
	return m
}

// planMove runs the plan pass, then refuses a move whose data the target's quota
// cannot take, or whose locked versions its object lock guardrails do not allow,
// before anything is created there; a move whose source has settings the spec does
// not declare waits for a choice (decideUndeclared).
func (r *Reconciler) planMove(ctx context.Context, scope *bucketScope, t *moveTargetScope, m *bkv1.MoveStatus) moveStep {
	p, done, err := r.runPass(ctx, scope, t, m, mover.ModePlan)
	if err != nil || !done {
		return moveWait(m, err)
	}
	if p.Plan == nil {
		return moveWait(m, errors.New("the plan pass ended without a plan"))
	}
	m.TotalObjects, m.TotalBytes, m.Boundaries = p.Plan.Objects, p.Plan.Bytes, p.Plan.Boundaries
	if err := beyondQuota(scope.sb, t, m); err != nil {
		r.yieldSlot(ctx, scope, m)
		return moveStep{err: err}
	}
	if refusal := lockedVersionsRefusal(p.Plan, t.store); refusal != nil {
		return moveStep{err: refusal}
	}
	if step := r.decideUndeclared(ctx, scope, t, m); step != nil {
		return *step
	}
	m.Phase, m.Pass, m.Message = bkv1.MoveCopying, 2, "copying every object"
	r.Recorder.Eventf(scope.sb, nil, corev1.EventTypeNormal, bkv1.ReasonMoving, "Move", "copying %d objects (%d bytes) to ObjectStore %s in %d shards", m.TotalObjects, m.TotalBytes, m.To, len(m.Boundaries)+1)
	return moveStep{requeue: time.Millisecond}
}

// beyondQuota refuses a move whose data, as its plan counted it, the target's quota
// cannot take.
func beyondQuota(sb *bkv1.StorageBucket, t *moveTargetScope, m *bkv1.MoveStatus) *reconcile.StepError {
	if limits, _, _ := desiredQuota(sb, t.store); (limits.MaxBytes > 0 && m.TotalBytes > limits.MaxBytes) || (limits.MaxObjects > 0 && m.TotalObjects > limits.MaxObjects) {
		return reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "the bucket holds %d objects of %d bytes, more than the quota ObjectStore %q would set (%s); nothing was created there",
			m.TotalObjects, m.TotalBytes, t.store.Name, limits)
	}
	return nil
}

// copyPass runs copy passes until one finds little to do, then freezes the source.
func (r *Reconciler) copyPass(ctx context.Context, scope *bucketScope, t *moveTargetScope, m *bkv1.MoveStatus) moveStep {
	if err := r.ensureMoveTarget(ctx, scope, t, m); err != nil {
		return moveFailed(m, err)
	}
	p, done, err := r.runPass(ctx, scope, t, m, mover.ModeCopy)
	if err != nil || !done {
		return moveWait(m, err)
	}
	changes := p.Counts.Changes()
	m.LastPassChanges = &changes
	if p.Failures.Count > 0 {
		r.yieldSlot(ctx, scope, m) // admitted again, the next pass tries them again
		return moveStep{requeue: r.SyncInterval, err: reconcile.Terminalf(bkv1.ReasonMoveFailed,
			"%d objects could not be copied to ObjectStore %q, so the move cannot cut over: %s", p.Failures.Count, m.To, p.Failures)}
	}
	m.Pass++
	if changes > defaults.MoveCutoverChanges && m.Pass < defaults.MoveMaxCatchUpPasses {
		m.Phase, m.Message = bkv1.MoveCatchingUp, fmt.Sprintf("the last pass copied or deleted %d objects; copying what changed since", changes)
		return moveStep{requeue: time.Millisecond}
	}
	// The freeze itself is the first step of the next pass (holdWritesForMove), so
	// that the configuration step keeps it in place rather than undoing it.
	m.Phase, m.Message = bkv1.MoveCuttingOver, "stopping the source's writes for the final pass"
	r.Recorder.Eventf(scope.sb, nil, corev1.EventTypeNormal, bkv1.ReasonMoving, "Move", "cutting over to ObjectStore %s: the last pass changed %d objects; the source's writes stop for the final pass", m.To, changes)
	return moveStep{requeue: time.Millisecond}
}

// finalPass copies the last changes of a frozen source and verifies both sides; only
// a verified pass switches the bucket's home. The store's key freezer (move_freezer.go)
// freezes, before each final pass, the keys its bucket policy does not bind.
func (r *Reconciler) finalPass(ctx context.Context, scope *bucketScope, t *moveTargetScope, m *bkv1.MoveStatus) moveStep {
	fz, err := r.freezerFor(ctx, scope.store)
	if err != nil {
		return moveWait(m, err)
	}
	if m.FrozenAt == nil {
		if err := r.freezeSource(ctx, scope); err != nil {
			return moveWait(m, err)
		}
		if err := fz.freeze(ctx, scope.sb, scope.bucket); err != nil {
			return moveWait(m, err)
		}
		now := metav1.NewTime(r.Clock.Now())
		m.FrozenAt, m.CutoverPass, m.CutoverRetryAt = &now, m.Pass, nil
	}
	p, done, err := r.runPass(ctx, scope, t, m, mover.ModeFinal)
	if err != nil || !done {
		return moveWait(m, err)
	}
	return r.judgeFinalPass(ctx, scope, t, m, fz, p)
}

// finishMove runs in the first pass that reconciled the bucket on its new home, its
// connection Secret included: the source, frozen since the cutover, is tagged as
// moved, the checkpoints go, and the write pause is known.
func (r *Reconciler) finishMove(ctx context.Context, scope *bucketScope) moveStep {
	sb, m := scope.sb, scope.sb.Status.Move
	if err := r.markSourceMoved(ctx, scope, m); err != nil {
		return moveWait(m, err)
	}
	if err := r.Mover.Forget(ctx, m.ID); err != nil {
		return moveWait(m, err)
	}
	var pause *time.Duration
	if m.FrozenAt != nil {
		m.WritePause = &metav1.Duration{Duration: r.Clock.Now().Sub(m.FrozenAt.Time).Round(time.Millisecond)}
		pause = &m.WritePause.Duration
	}
	if r.OnMoveEnd != nil {
		r.OnMoveEnd(sb.Namespace, sb.Name, pause)
	}
	r.endsMove(ctx, scope)
	sb.Status.LeftBehind = leftBehindAfter(sb.Status.LeftBehind, knownBucket(sb), m.From, sourceBucketOf(sb, m), m.To)
	m.Phase, m.ObjectsLeft, m.BytesPerSecond, m.Remaining = bkv1.MoveDone, 0, 0, nil
	m.Message = fmt.Sprintf("moved from ObjectStore %s; the source bucket is kept, its writes denied", m.From) + undeclaredNote(m)
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonMoved, "Move", "bucket %s moved from ObjectStore %s to %s; writes paused %s", sb.Status.BucketName, m.From, m.To, m.WritePause)
	return moveStep{}
}

// abortMove undoes an unfinished move: the mover stops, the source takes writes
// again, and the target bucket is emptied and deleted with the move's checkpoints, or,
// for a move past its plan, kept with them for a while (keepsTarget).
func (r *Reconciler) abortMove(ctx context.Context, scope *bucketScope, why string) moveStep {
	sb, m := scope.sb, scope.sb.Status.Move
	keep := r.keepsTarget(m)
	if r.Mover != nil {
		stop := r.Mover.Forget
		if keep {
			stop = r.Mover.Cancel // the checkpoints stay
		}
		if err := stop(ctx, m.ID); err != nil {
			return moveWait(m, err)
		}
	}
	if m.FrozenAt != nil {
		if err := thawBucket(ctx, scope.s3, scope.bucket); err != nil {
			return moveWait(m, err)
		}
	}
	// The keys are thawed whatever status says: a freeze whose FrozenAt was never
	// written (the operator stopped in between) is found on the store.
	if err := r.thawKeys(ctx, scope); err != nil {
		return moveWait(m, err)
	}
	m.FrozenAt = nil
	if !keep {
		done, err := r.removeMoveTarget(ctx, sb, m)
		if err != nil || !done {
			return moveWait(m, err)
		}
	}
	if m.TargetBucket == "" {
		for _, c := range leftBehindOn(sb.Status.LeftBehind, m.To, knownBucket(sb)) {
			if err := r.refreezeLeftBehind(ctx, scope, m, c.bucket); err != nil {
				return moveWait(m, err)
			}
		}
	}
	r.moveTargets.Delete(m.ID) // resumed, the move checks its target again
	if r.OnMoveEnd != nil {
		r.OnMoveEnd(sb.Namespace, sb.Name, nil)
	}
	r.endsMove(ctx, scope)
	m.Phase, m.Message = bkv1.MoveAborted, "cancelled ("+why+"): the target bucket was removed, the source is as it was"
	m.ObjectsLeft, m.BytesPerSecond, m.Remaining = 0, 0, nil
	if keep {
		until := metav1.NewTime(r.Clock.Now().Add(r.cancelledMoveKeep())).Rfc3339Copy()
		m.TargetKeptOn, m.TargetKeptUntil = m.To, &until
		m.Message = fmt.Sprintf("cancelled (%s): the source is as it was; the target bucket is kept until %s, to resume the move if asked again, then removed", why, until.UTC().Format(time.RFC3339))
		r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonMoveAborted, "Move", "move to ObjectStore %s cancelled: %s; the target bucket is kept until %s, then removed", m.To, why, until.UTC().Format(time.RFC3339))
		return moveStep{requeue: time.Millisecond}
	}
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonMoveAborted, "Move", "move to ObjectStore %s cancelled: %s; the target bucket was removed", m.To, why)
	return moveStep{requeue: time.Millisecond}
}

// yieldSlot gives the slots of a move that cannot go on (refused after its plan,
// objects that will not copy) back while no mover of it runs: it waits Queued, out
// of line while Stalled says why, and once admitted again it goes on at a copy pass
// (or its plan), so that moves the owner must see to take no slot from the others.
func (r *Reconciler) yieldSlot(ctx context.Context, scope *bucketScope, m *bkv1.MoveStatus) {
	m.Phase = bkv1.MoveQueued
	r.endsMove(ctx, scope)
}

// endsMove frees the move's slots once the status that ends it is written (its
// movers stopped before): the moves waiting for them are woken (moveEnded).
func (r *Reconciler) endsMove(ctx context.Context, scope *bucketScope) {
	key, m := client.ObjectKeyFromObject(scope.sb), scope.sb.Status.Move
	scope.patcher.AfterWrite(func() { r.moveEnded(ctx, key, m) })
}

// runPass starts the move's current pass on the mover (a no-op when it runs already)
// and reads its progress into status.
func (r *Reconciler) runPass(ctx context.Context, scope *bucketScope, t *moveTargetScope, m *bkv1.MoveStatus, mode mover.Mode) (mover.Progress, bool, error) {
	move, err := r.moverPass(ctx, scope, t, m, mode)
	if err != nil {
		return mover.Progress{}, false, err
	}
	if err := r.Mover.Start(ctx, move); err != nil {
		return mover.Progress{}, false, err
	}
	shards := move.Spec.RunShards()
	p, err := r.Mover.Progress(ctx, m.ID, int(m.Pass), shards)
	if err != nil {
		return p, false, err
	}
	recordProgress(m, p)
	if r.OnMoveProgress != nil {
		r.OnMoveProgress(scope.sb.Namespace, scope.sb.Name, m)
	}
	return p, p.Done >= shards, nil
}

// recordProgress writes a pass's figures into status.move.
func recordProgress(m *bkv1.MoveStatus, p mover.Progress) {
	m.CopiedObjects, m.CopiedBytes = p.Moved.Objects, p.Moved.Bytes
	m.BytesPerSecond = int64(p.BytesPerSecond)
	m.Remaining = nil
	if p.Remaining > 0 {
		m.Remaining = &metav1.Duration{Duration: p.Remaining.Round(time.Second)}
	}
	total := max(m.TotalObjects, p.Counts.ListedObjects)
	m.ObjectsLeft = max(0, total-p.Counts.ListedObjects)
	if p.Done == p.Shards {
		m.ObjectsLeft = 0
	}
	if len(p.Errors) > 0 {
		// In the mover's safe words (the store's answer, never its text, which may
		// name its addresses or TLS chain), as the conditions say store errors.
		m.Message = "the mover retries after: " + p.Errors[0] + "; the mover's log has the store's message"
	}
}

// moveWait keeps the move where it is and looks again soon: the mover runs, or a
// call failed in a way a retry can fix.
func moveWait(m *bkv1.MoveStatus, err error) moveStep {
	if err == nil {
		return moveStep{requeue: defaults.MovePollInterval}
	}
	se := reconcile.AsStepError(err, "moving the bucket")
	if se.Terminal {
		// Looked at again after the sync interval, or when a store changes.
		return moveStep{err: se}
	}
	m.Message = "retrying: " + se.Message
	return moveStep{requeue: defaults.MovePollInterval}
}

// moveFailed is moveWait for the target's checks, whose refusals are MoveNotAllowed.
func moveFailed(m *bkv1.MoveStatus, err error) moveStep {
	step := moveWait(m, err)
	if step.err != nil && step.err.Reason != bkv1.ReasonMoveNotAllowed && step.err.Reason != bkv1.ReasonMoveFailed {
		step.err = reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "%s (%s)", step.err.Message, step.err.Reason)
	}
	return step
}

// reportMove sets the conditions a move adds to the pass's verdict: Reconciling=True
// (Moving) while it runs, Stalled=True when it is refused or stuck. Ready keeps the
// bucket's own verdict: it serves from its home store while the move waits. A
// retirement's move sets neither: the claim's spec asked for nothing, and its
// StoreRetired condition tells how the move goes (reportRetirement).
func (r *Reconciler) reportMove(scope *bucketScope, step moveStep) {
	sb := scope.sb
	conds, gen := &sb.Status.Conditions, sb.Generation
	m := sb.Status.Move
	if scope.dest.retirement != nil {
		if step.err != nil && m != nil {
			m.Message = step.err.Message
		}
		return
	}
	switch {
	case step.err != nil:
		reconcile.SetCondition(conds, gen, bkv1.ConditionStalled, metav1.ConditionTrue, step.err.Reason, step.err.Message)
		reconcile.RemoveCondition(conds, bkv1.ConditionReconciling)
		if m != nil {
			m.Message = step.err.Message
		}
	case scope.moves():
		msg := "moving the bucket to ObjectStore " + scope.dest.store
		if m != nil {
			msg = fmt.Sprintf("%s: %s", m.Phase, m.Message)
		}
		reconcile.SetCondition(conds, gen, bkv1.ConditionReconciling, metav1.ConditionTrue, bkv1.ReasonMoving, msg)
		reconcile.RemoveCondition(conds, bkv1.ConditionStalled)
	}
}
