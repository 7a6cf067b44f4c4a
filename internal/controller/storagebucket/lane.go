package storagebucket

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// checkNameLane holds an explicit bucket name to its namespace's lane (naming.LaneStem):
// the store's prefix is shared by every namespace, so without a lane one tenant could
// create, ahead of time, the name another namespace's claim derives (that claim would
// stall OwnedByAnotherClaim for good) and learn from the refusals which names exist. A
// name outside the lane is refused before anything is sent to the store, so the refusal
// is the same whether or not such a bucket exists.
//
// Three ways past it, none of which a tenant can forge: the store's guardrails allow
// names outside the lane; the claim already holds the bucket (its status, which tenants
// cannot write, says so: a bucket provisioned before lanes keeps working); or the claim
// asks to adopt and the store lets its namespace adopt, in which case it may take an
// existing bucket but never create one (scope.adoptOnly).
func (r *Reconciler) checkNameLane(ctx context.Context, scope *bucketScope) (*reconcile.StepError, error) {
	sb, store := scope.sb, scope.store
	rails := &store.Spec.Guardrails
	if sb.Spec.BucketName == "" {
		return nil, nil
	}
	name := scope.bucket // spec.bucketName, or the lane name a move gave the bucket (bucketNameFor)
	if rails.AllowBucketNamesOutsideNamespace || rails.AllowAnyBucketName || holdsBucket(sb, name) {
		return nil, nil
	}
	inLane, err := r.inNamespaceLane(ctx, store.Spec.BucketNamePrefix, sb, name)
	if err != nil || inLane {
		return nil, err
	}
	if sb.Spec.Adoption == bkv1.AdoptionIfUnowned && rails.AdoptionAllowedNamespaces != nil {
		selected, err := r.namespaceSelected(ctx, rails.AdoptionAllowedNamespaces, sb.Namespace)
		if err != nil {
			return nil, err
		}
		if selected {
			scope.adoptOnly = true
			return nil, nil
		}
	}
	return laneRefusal("bucketName", name, sb.Namespace, store), nil
}

// laneRefusal says that name (what, "bucketName" or "bucket") lies outside namespace's
// lane on store, and what the lane is.
func laneRefusal(what, name, namespace string, store *bkv1.ObjectStore) *reconcile.StepError {
	return reconcile.Terminalf(bkv1.ReasonBucketNameNotAllowed,
		"%s %q is outside namespace %q's lane on ObjectStore %q: a bucket a claim creates must be named %q followed by a name that belongs to no longer namespace's lane and does not end in a hyphen and 8 hex digits (guardrails.allowBucketNamesOutsideNamespace is off)",
		what, name, namespace, store.Name, naming.LaneStem(store.Spec.BucketNamePrefix, namespace))
}

// checkMoveName holds the name of a bucket that moves to the target's rules for a
// bucket a claim creates there: the move creates it on the target under the name it
// has, so that name decides, never the claim's hold on it at its source (which
// checkNameLane lets by: a bucket named in another namespace's lane on a store that
// allowed it, or one bound before lanes, would otherwise land in that lane on a store
// that keeps lanes, where the other namespace's claim of the name would stall
// OwnedByAnotherClaim for good). The name the target would derive for this claim is
// its own there (the lane name a move under spec.move.bucketName: Lane takes); so is a
// name the target's guardrails.legacyBucketNames allow the namespace, where the claim
// holds it already. Any other name, a derived one made with another store's prefix
// included, is held to the target's bucketNamePrefix and to the namespace's lane as an
// explicit name is, and adoption's way past the lane does not apply: a move creates.
// Nothing is sent to the target, so the refusal reads the same whether or not a bucket
// of that name exists there.
func (r *Reconciler) checkMoveName(ctx context.Context, there *bucketScope) (*reconcile.StepError, error) {
	sb, store, name := there.sb, there.store, there.bucket
	rails, prefix := &store.Spec.Guardrails, store.Spec.BucketNamePrefix
	if name == naming.BucketName(prefix, sb.Namespace, sb.Name) || rails.AllowAnyBucketName || keptLegacyName(sb, store, name) {
		return nil, nil
	}
	if prefix != "" && !strings.HasPrefix(name, prefix) {
		return reconcile.Terminalf(bkv1.ReasonBucketNameNotAllowed, "bucket %q does not start with ObjectStore %q's bucketNamePrefix %q, and its guardrails.allowAnyBucketName is off",
			name, store.Name, prefix), nil
	}
	if rails.AllowBucketNamesOutsideNamespace {
		return nil, nil
	}
	inLane, err := r.inNamespaceLane(ctx, prefix, sb, name)
	if err != nil || inLane {
		return nil, err
	}
	return laneRefusal("bucket", name, sb.Namespace, store), nil
}

// inNamespaceLane says whether name is in the claim's namespace's lane: it starts with
// the namespace's stem, no namespace whose stem is longer also holds it, and it is not
// shaped like a derived name unless it is this claim's own derived name.
func (r *Reconciler) inNamespaceLane(ctx context.Context, prefix string, sb *bkv1.StorageBucket, name string) (bool, error) {
	if !strings.HasPrefix(name, naming.LaneStem(prefix, sb.Namespace)) {
		return false, nil
	}
	if naming.HasDerivedShape(name) && name != naming.BucketName(prefix, sb.Namespace, sb.Name) {
		return false, nil
	}
	for _, longer := range naming.LongerLanes(prefix, sb.Namespace, name) {
		err := r.Get(ctx, types.NamespacedName{Name: longer}, &corev1.Namespace{})
		if err == nil {
			return false, nil
		}
		if !apierrors.IsNotFound(err) {
			return false, err
		}
	}
	return true, nil
}

// holdsBucket says whether the claim already holds bucket, by what the operator wrote in
// its status: the bucket it provisioned, or the one it recorded it was about to create.
func holdsBucket(sb *bkv1.StorageBucket, bucket string) bool {
	return sb.Status.BucketName == bucket || createIntended(sb, bucket)
}
