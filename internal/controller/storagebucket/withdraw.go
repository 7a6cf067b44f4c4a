package storagebucket

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/guardrail"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// checkSuspended is what a suspended claim still gets: spec.suspend stops the
// operator's work on the bucket, never the platform team's guardrails. The claim is
// checked against its store's current namespace selector and guardrails, with no call to
// the store; a violation stalls it with the guardrail's reason (which revokes its keys)
// and takes from the bucket what the guardrails now forbid (withdrawForbidden). The
// store's health does not matter here: the check reads only specs.
func (r *Reconciler) checkSuspended(ctx context.Context, scope *bucketScope) (ctrl.Result, error) {
	sb := scope.sb
	store := &bkv1.ObjectStore{}
	if err := r.Get(ctx, types.NamespacedName{Name: sb.Spec.ObjectStoreRef.Name}, store); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // no store: nothing is served, nothing to check
	}
	scope.store, scope.bucket = store, bucketNameFor(sb, store)
	err := r.checkNamespaceAllowed(ctx, store, sb.Namespace)
	if err == nil {
		// Building the client sends nothing; only a withdrawal uses it.
		if c, region, cerr := r.bucketClient(ctx, sb, store); cerr == nil {
			scope.s3, scope.region = c, region
		}
		err = r.reconcileGuardrails(ctx, scope)
	}
	var refusal *reconcile.StepError
	if !errors.As(err, &refusal) || !reconcile.IsGuardrailRefusal(refusal.Reason) {
		return ctrl.Result{}, err
	}
	result, rerr := reconcile.SummarizeFailure(ctx, &sb.Status.Conditions, sb.Generation, &sb.Status.ObservedGeneration, refusal, r.SyncInterval, func() {
		scope.patcher.AfterWrite(func() {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, refusal.Reason, "Reconcile", "%s", refusal.Message)
		})
	})
	// Stalled (or Reconciling, while a withdrawal is retried) says what is wrong; the
	// Suspended condition markSuspended set still says why nothing else happens.
	return result, rerr
}

// withdrawForbidden takes from a bucket the claim owns what the store's guardrails now
// refuse: public access, and a policy the operator set that is public or outside the
// policy grammar the guardrails accept. A guardrail the platform team tightens must hold
// for the buckets it allowed before, not only for new ones; a refused claim otherwise
// configures nothing. Nothing is taken from a bucket the claim never provisioned, nor a
// policy the operator never set (found on an adopted bucket), nor one that still passes
// (a tenant's refused change leaves the policy it replaces in place).
func (r *Reconciler) withdrawForbidden(ctx context.Context, scope *bucketScope, refusal *reconcile.StepError) error {
	sb, store := scope.sb, scope.store
	if refusal.Reason != bkv1.ReasonPublicAccessNotAllowed && refusal.Reason != bkv1.ReasonPolicyNotAllowed {
		return nil
	}
	if scope.s3 == nil || sb.Status.BucketName == "" || sb.Status.BucketName != scope.bucket ||
		!reconcile.ConditionIsTrue(sb.Status.Conditions, bkv1.ConditionProvisioned) {
		return nil
	}
	withdrawn := false
	if !store.Spec.Guardrails.AllowPublicBuckets {
		changed, err := publicAccessSetting(true)(ctx, scope.s3, scope.bucket)
		if err != nil && s3.KindOf(err) != s3.KindNotImplemented {
			return err
		}
		withdrawn = withdrawn || changed
	}
	managed := managedConfigOf(sb, scope.bucket)
	if managed.exclusive || managed.applied.Policy {
		have, err := scope.s3.GetBucketPolicy(ctx, scope.bucket)
		if err != nil && s3.KindOf(err) != s3.KindNotImplemented {
			return err
		}
		if have != "" && policyForbidden(have, scope.bucket, store.Spec.Guardrails) {
			if err := scope.s3.DeleteBucketPolicy(ctx, scope.bucket); err != nil {
				return err
			}
			withdrawn = true
			if sb.Status.Applied != nil {
				sb.Status.Applied.Policy = false
			}
		}
	}
	if withdrawn {
		log.FromContext(ctx).Info("withdrew from the bucket what the store's guardrails now refuse", "bucket", scope.bucket, "reason", refusal.Reason)
		scope.patcher.AfterWrite(func() {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, refusal.Reason, "Withdraw",
				"removed from bucket %s what ObjectStore %q's guardrails now refuse (public access or policy)", scope.bucket, store.Name)
		})
	}
	return nil
}

// policyForbidden says whether a policy found on the bucket fails the guardrails as they
// are now: outside the accepted grammar (a Deny of configuration actions included), or
// public on a store that allows no public buckets.
func policyForbidden(doc, bucket string, rails bkv1.StoreGuardrails) bool {
	report, err := guardrail.InspectPolicy([]byte(doc), bucket, rails.PolicyPrincipalAccounts)
	if err != nil {
		return true
	}
	return report.Public != "" && !rails.AllowPublicBuckets
}
