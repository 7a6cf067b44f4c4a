package soak_test

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// The test control plane runs no kube-controller-manager: nothing deletes a deleted
// namespace's contents nor garbage-collects the dependents of a deleted owner. The soak
// does both, as those controllers would, continuously beside the operator; otherwise a
// namespace deletion would never finish and a stripped finalizer would leave Secrets
// and BucketAccesses that a real cluster removes.

// finishNamespaces is the namespace controller: for each tenant namespace being
// deleted it deletes every StorageBucket, BucketAccess and Secret in it (again on every
// pass, as the controller retries), and once none is left removes the namespace's
// finalizer, which lets the API server remove it. Objects whose finalizers never go keep
// their namespace, as in a real cluster.
func finishNamespaces(ctx context.Context) error {
	list := &corev1.NamespaceList{}
	if err := k8s.List(ctx, list, client.MatchingLabels{labelTenant: "true"}); err != nil {
		return err
	}
	for i := range list.Items {
		ns := &list.Items[i]
		if ns.DeletionTimestamp.IsZero() {
			continue
		}
		left := 0
		for _, l := range []client.ObjectList{&bkv1.StorageBucketList{}, &bkv1.BucketAccessList{}, &corev1.SecretList{}} {
			if err := k8s.List(ctx, l, client.InNamespace(ns.Name)); err != nil {
				return err
			}
			n := len(itemsOf(l))
			left += n
			if n == 0 {
				continue
			}
			var err error
			switch l.(type) {
			case *bkv1.StorageBucketList:
				err = k8s.DeleteAllOf(ctx, &bkv1.StorageBucket{}, client.InNamespace(ns.Name))
			case *bkv1.BucketAccessList:
				err = k8s.DeleteAllOf(ctx, &bkv1.BucketAccess{}, client.InNamespace(ns.Name))
			default:
				err = k8s.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(ns.Name))
			}
			if err != nil {
				return err
			}
		}
		if left > 0 || len(ns.Spec.Finalizers) == 0 {
			continue
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8s.Get(ctx, client.ObjectKey{Name: ns.Name}, ns); err != nil {
				return client.IgnoreNotFound(err)
			}
			ns.Spec.Finalizers = nil
			return k8s.SubResource("finalize").Update(ctx, ns)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func itemsOf(l client.ObjectList) []client.Object {
	var out []client.Object
	switch l := l.(type) {
	case *bkv1.StorageBucketList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *bkv1.BucketAccessList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.SecretList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	}
	return out
}

// collectGarbage is the garbage collector, for the dependents the operator makes
// (connection and access Secrets, the BucketAccess a StorageBucket's spec.access
// makes): one whose owners are all gone (no object of that UID) is deleted in the
// background, as with the default propagation.
func collectGarbage(ctx context.Context) error {
	sbs, bas, secrets := &bkv1.StorageBucketList{}, &bkv1.BucketAccessList{}, &corev1.SecretList{}
	for _, l := range []client.ObjectList{sbs, bas, secrets} {
		if err := k8s.List(ctx, l); err != nil {
			return err
		}
	}
	live := map[types.UID]bool{}
	for _, o := range append(itemsOf(sbs), itemsOf(bas)...) {
		live[o.GetUID()] = true
	}
	for _, o := range append(itemsOf(bas), itemsOf(secrets)...) {
		refs := o.GetOwnerReferences()
		orphaned := len(refs) > 0
		for _, ref := range refs {
			if !ownerKind(ref) || live[ref.UID] {
				orphaned = false
			}
		}
		if !orphaned {
			continue
		}
		// The lists are not one snapshot: as the garbage collector does, look each
		// owner up again before deleting, so a Secret made for an owner created
		// after the owners were listed is not taken for an orphan.
		if gone, err := ownersGone(ctx, o); err != nil || !gone {
			if err != nil {
				return err
			}
			continue
		}
		err := k8s.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: ptr(o.GetUID())})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

// ownersGone reads each owner of o: gone when no object of its name has its UID.
func ownersGone(ctx context.Context, o client.Object) (bool, error) {
	for _, ref := range o.GetOwnerReferences() {
		var owner client.Object = &bkv1.StorageBucket{}
		if ref.Kind == "BucketAccess" {
			owner = &bkv1.BucketAccess{}
		}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}, owner)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		if err == nil && owner.GetUID() == ref.UID {
			return false, nil
		}
	}
	return true, nil
}

// ownerKind: owners of the kinds whose liveness the soak knows (any other owner counts
// as alive).
func ownerKind(ref metav1.OwnerReference) bool {
	return ref.APIVersion == bkv1.GroupVersion.String() && (ref.Kind == "StorageBucket" || ref.Kind == "BucketAccess")
}

func ptr[T any](v T) *T { return &v }
