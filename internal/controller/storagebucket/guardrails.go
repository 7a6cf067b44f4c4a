package storagebucket

import (
	"context"
	"errors"
	"strings"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/guardrail"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// reconcileGuardrails refuses what the ObjectStore's guardrails do not allow, before
// anything is sent to the store: a refused claim creates, tags and configures nothing.
// It runs on every pass, suspended or not, so a guardrail the platform team tightens
// later stalls the claims it now refuses, and what it now forbids on their buckets
// (public access, a public or refused policy the operator set) is withdrawn. Each
// refusal's reason names the guardrail, or WithdrawalRefused when the store refused the
// operator the removal of what it forbids. The policy it accepts is kept in scope.policy
// as checked, for the configuration step to send. Of the guardrails, only the name's
// lane (checkNameLane) reads more than the two specs: the namespaces it could collide
// with, from the cache.
func (r *Reconciler) reconcileGuardrails(ctx context.Context, scope *bucketScope) error {
	refusal := checkGuardrails(scope)
	if refusal == nil {
		var err error
		if refusal, err = r.checkNameLane(ctx, scope); refusal == nil {
			return err
		}
	}
	if err := r.withdrawForbidden(ctx, scope, refusal); err != nil {
		var refusedByStore *reconcile.StepError
		if errors.As(err, &refusedByStore) && refusedByStore.Terminal {
			return refusedByStore // the store refused the operator: WithdrawalRefused
		}
		// The refusal stands; what it forbids is still on the bucket, so retry.
		return &reconcile.StepError{Reason: refusal.Reason, Message: refusal.Message + "; removing what it forbids from the bucket failed, will retry", Err: err}
	}
	return refusal
}

// checkGuardrails is the guardrails' verdict on the claim, from its spec and the store's
// spec alone.
func checkGuardrails(scope *bucketScope) *reconcile.StepError {
	sb, store := scope.sb, scope.store
	rails := &store.Spec.Guardrails
	// The name in use: spec.bucketName, or the lane name a move gave the bucket; a
	// legacy name the store allows the namespace passes where the claim holds it.
	if prefix, name := store.Spec.BucketNamePrefix, scope.bucket; sb.Spec.BucketName != "" && prefix != "" && !rails.AllowAnyBucketName &&
		!strings.HasPrefix(name, prefix) && !keptLegacyName(sb, store, name) {
		return reconcile.Terminalf(bkv1.ReasonBucketNameNotAllowed, "bucketName %q does not start with ObjectStore %q's bucketNamePrefix %q, and its guardrails.allowAnyBucketName is off",
			name, store.Name, prefix)
	}
	if !rails.DeletionPolicyAllowed(sb.Spec.DeletionPolicy) {
		return reconcile.Terminalf(bkv1.ReasonDeletionPolicyNotAllowed, "deletionPolicy %s is not among ObjectStore %q's guardrails.allowedDeletionPolicies %v",
			sb.Spec.DeletionPolicy, store.Name, rails.AllowedDeletionPolicies)
	}
	var refused *guardrail.PolicyError
	if err := guardrail.CheckTags(sb.Spec.Tags); errors.As(err, &refused) {
		return reconcile.Terminalf(bkv1.ReasonInvalidTags, "%s", refused.Message)
	}
	if sb.Spec.PublicAccess == bkv1.PublicAccessAllowed && !rails.AllowPublicBuckets {
		return reconcile.Terminalf(bkv1.ReasonPublicAccessNotAllowed, "publicAccess: Allowed needs ObjectStore %q's guardrails.allowPublicBuckets", store.Name)
	}
	if raw := policyDocument(sb.Spec.Policy); raw != "" {
		report, err := guardrail.InspectPolicy([]byte(raw), scope.bucket, rails.PolicyPrincipalAccounts)
		if err != nil {
			message := err.Error()
			if errors.As(err, &refused) {
				message = refused.Message
			}
			return reconcile.Terminalf(bkv1.ReasonPolicyNotAllowed, "%s", message)
		}
		if report.Public != "" && !rails.AllowPublicBuckets {
			return reconcile.Terminalf(bkv1.ReasonPublicAccessNotAllowed, "policy %s grants %s: not one specific identity, so the bucket would be public, which needs ObjectStore %q's guardrails.allowPublicBuckets",
				report.Public, report.PublicPrincipal, store.Name)
		}
		scope.policy = report.Canonical
	}
	if refusal := checkObjectLock(sb, store); refusal != nil {
		return refusal
	}
	limits, named, refusal := desiredQuota(sb, store)
	if refusal != nil {
		return refusal
	}
	scope.quota = quotaPlan{want: limits, named: named}
	return nil
}
