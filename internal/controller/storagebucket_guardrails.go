package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/guardrail"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// reconcileGuardrails refuses what the ObjectStore's guardrails do not allow, before
// anything is sent to the store: a refused claim creates, tags and configures nothing.
// It runs on every pass, suspended or not, so a guardrail the platform team tightens
// later stalls the claims it now refuses, and what it now forbids on their buckets
// (public access, a public or refused policy the operator set) is withdrawn. Each
// refusal's reason names the guardrail. The policy it accepts is kept in scope.policy
// as checked, for the configuration step to send.
func (r *StorageBucketReconciler) reconcileGuardrails(ctx context.Context, scope *bucketScope) error {
	refusal := checkGuardrails(scope)
	if refusal == nil {
		var err error
		if refusal, err = r.checkNameLane(ctx, scope); refusal == nil {
			return err
		}
	}
	if err := r.withdrawForbidden(ctx, scope, refusal); err != nil {
		// The refusal stands; what it forbids is still on the bucket, so retry.
		return &stepError{Reason: refusal.Reason, Message: refusal.Message + "; removing what it forbids from the bucket failed, will retry", Err: err}
	}
	return refusal
}

// checkGuardrails is the guardrails' verdict on the claim, from its spec and the store's
// spec alone.
func checkGuardrails(scope *bucketScope) *stepError {
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
		if err != nil {
			message := err.Error()
			if errors.As(err, &refused) {
				message = refused.Message
			}
			return terminalf(bkv1.ReasonPolicyNotAllowed, "%s", message)
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

// checkAdoptionOwner lets a claim adopt only a bucket that the store's credentials own:
// an identity that can see every bucket of the store (SeaweedFS's admin identities,
// Versity's root, an AWS role with cross-account grants) also sees buckets other
// identities or accounts created, which no tag marks as anyone's, and adopting one would
// hand a tenant another owner's data. The store's own record of the owner decides; a
// store that keeps none, or will not say, gets no adoption. The refusal says no more
// than that the bucket is not the operator's to adopt: the tenant learns nothing of
// whose it is.
func checkAdoptionOwner(ctx context.Context, scope *bucketScope) error {
	owners, err := scope.s3.BucketOwners(ctx, scope.bucket)
	switch {
	case err == nil:
	case s3.KindOf(err) == s3.KindNotImplemented || s3.KindOf(err) == s3.KindAccessDenied:
		return terminalf(bkv1.ReasonBucketNameTaken, "bucket %q already exists and the store does not say that ObjectStore %q's credentials own it; only a bucket they own is adopted",
			scope.bucket, scope.store.Name)
	default:
		return asStepError(err, fmt.Sprintf("reading the owner of bucket %q", scope.bucket))
	}
	if !owners.Same() {
		return terminalf(bkv1.ReasonBucketNameTaken, "bucket %q already exists and belongs to another identity or account of the store than ObjectStore %q's credentials; only a bucket they own is adopted",
			scope.bucket, scope.store.Name)
	}
	return nil
}
