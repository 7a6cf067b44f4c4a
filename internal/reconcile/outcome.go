package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// StepError is how a sub-reconciler reports a failure: the condition reason a person
// sees, and whether retrying can help. Terminal errors set Stalled and wait for a change
// (spec, store, Secret) or the next sync; transient ones go back to the queue with
// per-object exponential backoff.
type StepError struct {
	Reason   string
	Message  string
	Terminal bool
	// Waiting marks a failure that another object's watch will resolve (the store
	// becoming reachable): neither stalled nor retried on a timer.
	Waiting bool
	// KeepsVerdict marks a failure that says nothing about the object itself (its
	// ObjectStore's new spec is not checked yet): an object verified before keeps its
	// conditions, so editing a store does not flip every bucket on it to Ready=False
	// and back.
	KeepsVerdict bool
	Err          error
}

func (e *StepError) Error() string {
	if e.Err != nil && e.Message == "" {
		return e.Err.Error()
	}
	return e.Message
}

func (e *StepError) Unwrap() error { return e.Err }

func Terminalf(reason, format string, args ...any) *StepError {
	return &StepError{Reason: reason, Message: fmt.Sprintf(format, args...), Terminal: true}
}

func Waitingf(reason, format string, args ...any) *StepError {
	return &StepError{Reason: reason, Message: fmt.Sprintf(format, args...), Waiting: true}
}

// AsStepError turns any error into a StepError. S3 errors are mapped by kind (see
// KindVerdicts) so the same failure reads the same on every store; anything unknown is
// transient.
func AsStepError(err error, doing string) *StepError {
	var se *StepError
	if errors.As(err, &se) {
		return se
	}
	var store *stores.Error
	if errors.As(err, &store) {
		return &StepError{Reason: store.Reason, Message: store.Message, Terminal: true, Err: err}
	}
	if apierrors.IsForbidden(err) {
		// The operator's own RBAC is short of a verb: retried with backoff, so fixing
		// the Role is enough, and the message names what was refused.
		return &StepError{Reason: bkv1.ReasonForbidden, Message: fmt.Sprintf("%s: the operator lacks a permission: %v", doing, err), Err: err}
	}
	kind := s3.KindOf(err)
	verdict := VerdictOf(kind)
	msg := fmt.Sprintf("%s: %v", doing, err)
	var s3err *s3.Error
	if errors.As(err, &s3err) {
		// Tenants read this message: the operation, the kind of failure and the store's
		// error code. The store's own text (which may name its addresses, TLS chain,
		// internal paths or other tenants' buckets) stays in the ObjectStore's status and
		// the operator's log, which SummarizeFailure writes with the whole error.
		where := "the operator's log has the store's message"
		if verdict.StoreDetail {
			where = "the ObjectStore's status has the details"
		}
		msg = fmt.Sprintf("%s: %s; %s", doing, s3err.Summary(), where)
	}
	out := &StepError{Reason: verdict.Reason, Terminal: verdict.Terminal, Message: msg, Err: err}
	return out
}

// SummarizeFailure writes the kstatus verdict of a failed pass onto conds: Ready=False
// with the failure, then Stalled=True when a person must act (terminal; warn is called
// when that reason first appears), or Reconciling=True while waiting or retrying. It
// returns the reconcile's result and moves observedGeneration only for a final verdict.
func SummarizeFailure(ctx context.Context, conds *[]metav1.Condition, gen int64, observed *int64, err *StepError, syncInterval time.Duration, warn func()) (ctrl.Result, error) {
	SetCondition(conds, gen, bkv1.ConditionReady, metav1.ConditionFalse, err.Reason, err.Message)
	switch {
	case err.Terminal:
		if c := FindCondition(*conds, bkv1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != err.Reason {
			warn()
		}
		SetCondition(conds, gen, bkv1.ConditionStalled, metav1.ConditionTrue, err.Reason, err.Message)
		RemoveCondition(conds, bkv1.ConditionReconciling)
		*observed = gen
		return ctrl.Result{RequeueAfter: syncInterval}, nil
	case err.Waiting:
		SetCondition(conds, gen, bkv1.ConditionReconciling, metav1.ConditionTrue, err.Reason, err.Message)
		RemoveCondition(conds, bkv1.ConditionStalled)
		return ctrl.Result{RequeueAfter: syncInterval}, nil
	default:
		SetCondition(conds, gen, bkv1.ConditionReconciling, metav1.ConditionTrue, err.Reason, err.Message)
		RemoveCondition(conds, bkv1.ConditionStalled)
		detail := err.Message
		if err.Err != nil {
			detail = err.Err.Error() // the full text, which the condition may shorten for tenants
		}
		log.FromContext(ctx).Info("will retry", "reason", err.Reason, "error", detail)
		return ctrl.Result{}, err
	}
}
