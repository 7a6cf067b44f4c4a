package storagebucket

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
	if err := r.Get(ctx, types.NamespacedName{Name: sb.HomeStore()}, store); err != nil {
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
// refuse: a policy the operator set that is public or outside the policy grammar the
// guardrails accept, and public access. A guardrail the platform team tightens must hold
// for the buckets it allowed before, not only for new ones; a refused claim otherwise
// configures nothing. Nothing is taken from a bucket the claim never provisioned, nor a
// policy the operator never set (found on an adopted bucket), nor one that still passes
// (a tenant's refused change leaves the policy it replaces in place).
//
// One refused call does not stop it: each step is tried whatever the others answered,
// the policy first (a Deny in it is what would refuse the public-access block). What
// the store refuses (AccessDenied: a Deny in a policy written before the guardrails
// refused such Denies, or credentials that lack the permission) cannot be retried into
// working, so once a pass removes nothing more it is the claim's own terminal reason,
// WithdrawalRefused, naming the bucket for the store admin, who must remove it by hand;
// any other failure is retried. It returns nil once nothing forbidden is left that it
// could remove.
func (r *Reconciler) withdrawForbidden(ctx context.Context, scope *bucketScope, refusal *reconcile.StepError) error {
	sb, store := scope.sb, scope.store
	if refusal.Reason != bkv1.ReasonPublicAccessNotAllowed && refusal.Reason != bkv1.ReasonPolicyNotAllowed {
		return nil
	}
	if scope.s3 == nil || sb.Status.BucketName == "" || sb.Status.BucketName != scope.bucket ||
		!reconcile.ConditionIsTrue(sb.Status.Conditions, bkv1.ConditionProvisioned) {
		return nil
	}
	w := &withdrawal{}
	managed := managedConfigOf(sb, scope.bucket)
	if managed.exclusive || managed.applied.Policy {
		if w.withdrawPolicy(ctx, scope.s3, scope.bucket, store.Spec.Guardrails) && sb.Status.Applied != nil {
			sb.Status.Applied.Policy = false
		}
	}
	if !store.Spec.Guardrails.AllowPublicBuckets {
		changed, err := publicAccessSetting(true)(ctx, scope.s3, scope.bucket)
		w.step("PutPublicAccessBlock", "public access (the public-access block is back on)", "public access (no public-access block)", changed, err)
	}
	if len(w.removed) > 0 {
		log.FromContext(ctx).Info("withdrew from the bucket what the store's guardrails now refuse", "bucket", scope.bucket, "reason", refusal.Reason, "removed", w.removed)
		removed := strings.Join(w.removed, " and ")
		scope.patcher.AfterWrite(func() {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, refusal.Reason, "Withdraw",
				"withdrew from bucket %s what ObjectStore %q's guardrails now refuse: %s", scope.bucket, store.Name, removed)
		})
	}
	switch {
	case w.err != nil:
		return w.err
	case len(w.refused) == 0:
		return nil
	case len(w.removed) > 0:
		// What was just removed (a policy's Deny) may be what refused the rest.
		return fmt.Errorf("the store refused %s on bucket %q; retrying now that %s is removed", strings.Join(w.refused, ", "), scope.bucket, strings.Join(w.removed, " and "))
	}
	left, verb, it := strings.Join(w.left, " and "), "is", "it"
	if len(w.left) > 1 {
		verb, it = "are", "them"
	}
	msg := fmt.Sprintf("%s; the store refused the operator's %s on bucket %q (AccessDenied), so %s %s still on the bucket: ObjectStore %q's admin must remove %s by hand (a Deny in the bucket's policy, or the operator's credentials, forbid it)",
		refusal.Message, strings.Join(w.refused, ", "), scope.bucket, left, verb, store.Name, it)
	log.FromContext(ctx).Error(nil, "the store refused the withdrawal of what its guardrails forbid; remove it by hand", "bucket", scope.bucket, "objectStore", store.Name,
		"refused", w.refused, "left", w.left)
	if c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionReady); c == nil || c.Reason != bkv1.ReasonWithdrawalRefused {
		scope.patcher.AfterWrite(func() {
			r.Recorder.Eventf(store, sb, corev1.EventTypeWarning, bkv1.ReasonWithdrawalRefused, "Withdraw",
				"the store refused the operator's %s on bucket %s (StorageBucket %s/%s): remove %s from it by hand",
				strings.Join(w.refused, ", "), scope.bucket, sb.Namespace, sb.Name, left)
		})
	}
	return reconcile.Terminalf(bkv1.ReasonWithdrawalRefused, "%s", msg)
}

// withdrawal is what one withdrawForbidden pass did, step by step.
type withdrawal struct {
	removed []string // what was taken off the bucket
	refused []string // the calls the store refused
	left    []string // what those refusals left on the bucket
	err     error    // the first other failure: retried
}

// step records one step's outcome: what it removed, what the store's refusal left on
// the bucket and the call refused (as the store's answer names it, else call), or
// another failure. A store without the feature, or a bucket without the thing (a
// policy gone already), has nothing of it to remove.
func (w *withdrawal) step(call, removed, left string, changed bool, err error) {
	switch {
	case err == nil:
		if changed {
			w.removed = append(w.removed, removed)
		}
	case s3.KindOf(err) == s3.KindNotImplemented, s3.KindOf(err) == s3.KindNotFound:
	case s3.KindOf(err) == s3.KindAccessDenied:
		var answer *s3.Error
		if errors.As(err, &answer) && answer.Op != "" {
			call = answer.Op
		}
		w.refused, w.left = append(w.refused, call), append(w.left, left)
	case w.err == nil:
		w.err = err
	}
}

// withdrawPolicy deletes the bucket's policy if the guardrails now refuse it, and says
// whether it did. A policy the operator may not even read is deleted too: no policy
// the guardrails accept denies the operator a configuration call, so it is one of a
// kind they refuse.
func (w *withdrawal) withdrawPolicy(ctx context.Context, c s3.Client, bucket string, rails bkv1.StoreGuardrails) bool {
	have, err := c.GetBucketPolicy(ctx, bucket)
	switch {
	case s3.KindOf(err) == s3.KindAccessDenied:
	case err != nil:
		w.step("GetBucketPolicy", "the policy", "the policy", false, err)
		return false
	case have == "" || !policyForbidden(have, bucket, rails):
		return false
	}
	err = c.DeleteBucketPolicy(ctx, bucket)
	w.step("DeleteBucketPolicy", "the policy", "the policy", err == nil, err)
	return err == nil
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
