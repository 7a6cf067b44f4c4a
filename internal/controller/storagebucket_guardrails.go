package controller

import (
	"context"
	"errors"
	"strings"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/guardrail"
)

// reconcileGuardrails refuses what the ObjectStore's guardrails do not allow, before
// anything is sent to the store: a refused claim creates, tags and configures nothing.
// It runs on every pass, so a guardrail the platform team tightens later stalls the
// claims it now refuses (their buckets are left as they are). Each refusal's reason
// names the guardrail. The policy it accepts is kept in scope.policy as checked, for
// the configuration step to send.
func (r *StorageBucketReconciler) reconcileGuardrails(_ context.Context, scope *bucketScope) error {
	sb, store := scope.sb, scope.store
	rails := &store.Spec.Guardrails
	if prefix := store.Spec.BucketNamePrefix; sb.Spec.BucketName != "" && prefix != "" && !rails.AllowAnyBucketName && !strings.HasPrefix(sb.Spec.BucketName, prefix) {
		return terminalf(bkv1.ReasonBucketNameNotAllowed, "bucketName %q does not start with ObjectStore %q's bucketNamePrefix %q, and its guardrails.allowAnyBucketName is off",
			sb.Spec.BucketName, store.Name, prefix)
	}
	if !rails.DeletionPolicyAllowed(sb.Spec.DeletionPolicy) {
		return terminalf(bkv1.ReasonDeletionPolicyNotAllowed, "deletionPolicy %s is not among ObjectStore %q's guardrails.allowedDeletionPolicies %v",
			sb.Spec.DeletionPolicy, store.Name, rails.AllowedDeletionPolicies)
	}
	var refused *guardrail.PolicyError
	if err := guardrail.CheckTags(sb.Spec.Tags); errors.As(err, &refused) {
		return terminalf(bkv1.ReasonInvalidTags, "%s", refused.Message)
	}
	if sb.Spec.PublicAccess == bkv1.PublicAccessAllowed && !rails.AllowPublicBuckets {
		return terminalf(bkv1.ReasonPublicAccessNotAllowed, "publicAccess: Allowed needs ObjectStore %q's guardrails.allowPublicBuckets", store.Name)
	}
	if raw := policyDocument(sb.Spec.Policy); raw != "" {
		report, err := guardrail.InspectPolicy([]byte(raw), scope.bucket)
		if errors.As(err, &refused) {
			return terminalf(bkv1.ReasonPolicyNotAllowed, "%s", refused.Message)
		}
		if err != nil {
			return err
		}
		if report.Public != "" && !rails.AllowPublicBuckets {
			return terminalf(bkv1.ReasonPublicAccessNotAllowed, "policy %s grants an anonymous or wildcard principal, which needs ObjectStore %q's guardrails.allowPublicBuckets",
				report.Public, store.Name)
		}
		scope.policy = report.Canonical
	}
	return nil
}

// checkAdoptionAllowed is the guardrail on taking over a pre-existing bucket: only
// namespaces that the store's guardrails.adoptionAllowedNamespaces selects may.
func (r *StorageBucketReconciler) checkAdoptionAllowed(ctx context.Context, scope *bucketScope) error {
	sel := scope.store.Spec.Guardrails.AdoptionAllowedNamespaces
	if sel == nil {
		return terminalf(bkv1.ReasonAdoptionNotAllowed, "bucket %q already exists and ObjectStore %q allows no adoption of existing buckets (guardrails.adoptionAllowedNamespaces is unset)",
			scope.bucket, scope.store.Name)
	}
	ok, err := r.namespaceSelected(ctx, sel, scope.sb.Namespace)
	if err != nil {
		return err
	}
	if !ok {
		return terminalf(bkv1.ReasonAdoptionNotAllowed, "bucket %q already exists and ObjectStore %q's guardrails.adoptionAllowedNamespaces does not select namespace %q",
			scope.bucket, scope.store.Name, scope.sb.Namespace)
	}
	return nil
}
