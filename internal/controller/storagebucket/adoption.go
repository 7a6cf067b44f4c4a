package storagebucket

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/guardrail"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// checkAdoptionAllowed is the guardrail on taking over a pre-existing bucket: only
// namespaces that the store's guardrails.adoptionAllowedNamespaces selects may.
func (r *Reconciler) checkAdoptionAllowed(ctx context.Context, scope *bucketScope) error {
	sel := scope.store.Spec.Guardrails.AdoptionAllowedNamespaces
	if sel == nil {
		return reconcile.Terminalf(bkv1.ReasonAdoptionNotAllowed, "bucket %q already exists and ObjectStore %q allows no adoption of existing buckets (guardrails.adoptionAllowedNamespaces is unset)",
			scope.bucket, scope.store.Name)
	}
	ok, err := r.namespaceSelected(ctx, sel, scope.sb.Namespace)
	if err != nil {
		return err
	}
	if !ok {
		return reconcile.Terminalf(bkv1.ReasonAdoptionNotAllowed, "bucket %q already exists and ObjectStore %q's guardrails.adoptionAllowedNamespaces does not select namespace %q",
			scope.bucket, scope.store.Name, scope.sb.Namespace)
	}
	return nil
}

// checkAdoptionOwner lets a claim adopt only a bucket of the operator's own account.
// Tags say only that no claim holds a bucket; the operator's credentials often reach
// buckets of other identities and accounts as well (a SeaweedFS gateway admin sees and
// writes every bucket), and adopting one would hand it, and a purge of it, to a tenant.
// The bucket's owner is read from its ACL and compared with the store's
// guardrails.adoptionBucketOwner, or without it with the owner ListBuckets names for
// the operator's credentials (see s3.Client.CallerOwner for where that suffices). An
// ACL that names no owner (MinIO's) is the operator's account's only where the store
// admin stated the store has one account (guardrails.adoptionSingleAccount;
// guardrail.BucketOwnerAdoptable). Another owner, an ACL closed to us and a store that
// names no owner all read the same to the tenant; the operator's log says which it
// was, for the store admin.
func (r *Reconciler) checkAdoptionOwner(ctx context.Context, scope *bucketScope) error {
	rails := &scope.store.Spec.Guardrails
	want := rails.AdoptionBucketOwner
	got, err := scope.s3.BucketOwner(ctx, scope.bucket)
	switch kind := s3.KindOf(err); {
	case err == nil:
		ok, err := guardrail.BucketOwnerAdoptable(got, rails.AdoptionSingleAccount, func() (string, error) {
			if want == "" {
				caller, err := scope.s3.CallerOwner(ctx)
				if err != nil {
					return "", reconcile.AsStepError(err, "reading whom the store names as the owner of the operator's buckets")
				}
				want = caller
			}
			return want, nil
		})
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	case kind != s3.KindAccessDenied && kind != s3.KindNotImplemented:
		return reconcile.AsStepError(err, fmt.Sprintf("reading the owner of bucket %q", scope.bucket))
	}
	hint := "set the ObjectStore's guardrails.adoptionBucketOwner if the store names the operator's account differently"
	if err == nil && got == "" {
		hint = "the store names no owner: set the ObjectStore's guardrails.adoptionSingleAccount if every bucket on it is the operator's account's (MinIO)"
	}
	log.FromContext(ctx).Info("adoption refused: the bucket is not the operator's account's",
		"bucket", scope.bucket, "owner", got, "expected", want, "error", err, "hint", hint)
	return reconcile.Terminalf(bkv1.ReasonBucketNameTaken, "bucket %q belongs to another account: only a bucket of the account ObjectStore %q acts for can be adopted",
		scope.bucket, scope.store.Name)
}
