package storagebucket

import (
	"context"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// +kubebuilder:rbac:groups=bucketkeeper.io,resources=bucketaccesses,verbs=create;delete

// implicitAccessSecretName is the Secret an implicit BucketAccess writes.
func implicitAccessSecretName(sb *bkv1.StorageBucket) string { return sb.Name + "-access" }

// reconcileImplicitAccess keeps the one-bucket case one object: spec.access ReadWrite
// or ReadOnly on an IAM store means a BucketAccess of the same name, controlled by
// the StorageBucket, over this bucket alone. The BucketAccess controller does the
// rest (and revokes its key when this StorageBucket is deleted). Switching access to
// None, or the store away from IAM, deletes it.
func (r *Reconciler) reconcileImplicitAccess(ctx context.Context, scope *bucketScope) error {
	sb := scope.sb
	want := sb.Spec.Access == string(bkv1.AccessReadWrite) || sb.Spec.Access == string(bkv1.AccessReadOnly)
	want = want && stores.AccessProviderOf(scope.store) == bkv1.AccessProviderIAM

	current := &bkv1.BucketAccess{}
	err := r.Get(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}, current)
	switch {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return err
	case !metav1.IsControlledBy(current, sb):
		scope.accessVersion = current.ResourceVersion
		if want {
			return reconcile.Terminalf(bkv1.ReasonSecretConflict, "a BucketAccess %q not made for this StorageBucket exists; remove spec.access or rename it", sb.Name)
		}
		return nil // someone's explicit access: not ours to touch
	}
	if !want {
		if current != nil {
			return client.IgnoreNotFound(r.Delete(ctx, current))
		}
		return nil
	}
	grant := bkv1.BucketGrant{Name: sb.Name, Mode: bkv1.AccessMode(sb.Spec.Access)}
	if current == nil {
		ba := &bkv1.BucketAccess{
			// The bucket's labels, so the access lands in the same shard
			// (--watch-label-selector).
			ObjectMeta: metav1.ObjectMeta{Namespace: sb.Namespace, Name: sb.Name, Labels: maps.Clone(sb.Labels)},
			Spec:       bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{grant}, SecretName: implicitAccessSecretName(sb)},
		}
		if err := controllerutil.SetControllerReference(sb, ba, r.Scheme()); err != nil {
			return err
		}
		err := r.Create(ctx, ba)
		scope.accessVersion = ba.ResourceVersion
		return err
	}
	if len(current.Spec.Buckets) != 1 || current.Spec.Buckets[0] != grant || current.Spec.SecretName != implicitAccessSecretName(sb) || !maps.Equal(current.Labels, sb.Labels) {
		current.Labels = maps.Clone(sb.Labels)
		current.Spec.Buckets = []bkv1.BucketGrant{grant}
		current.Spec.SecretName = implicitAccessSecretName(sb)
		err := r.Update(ctx, current)
		scope.accessVersion = current.ResourceVersion
		return err
	}
	scope.accessVersion = current.ResourceVersion
	return nil
}
