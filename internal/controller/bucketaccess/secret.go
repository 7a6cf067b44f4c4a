package bucketaccess

import (
	"context"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// currentAccessSecret returns the access's Secret, nil when there is none. A
// Secret of that name the access does not control is never read for keys nor
// overwritten.
func (r *Reconciler) currentAccessSecret(ctx context.Context, ba *bkv1.BucketAccess) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ba.Namespace, Name: ba.Spec.SecretName}, secret)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !metav1.IsControlledBy(secret, ba) {
		return nil, reconcile.Terminalf(bkv1.ReasonSecretConflict, "Secret %q exists and is not managed by this BucketAccess; choose another spec.secretName", ba.Spec.SecretName)
	}
	return secret, nil
}

// writeAccessSecretFrom rewrites the Secret's connection details around the key
// it already holds (buckets or endpoint may have changed).
func (r *Reconciler) writeAccessSecretFrom(ctx context.Context, s *accessScope, secret *corev1.Secret) error {
	if secret == nil {
		return nil
	}
	return r.writeAccessSecret(ctx, s, string(secret.Data[bkv1.AccessSecretKeyAccessKeyID]), string(secret.Data[bkv1.AccessSecretKeySecretKey]))
}

// writeAccessSecret creates or updates the Secret with the given key.
func (r *Reconciler) writeAccessSecret(ctx context.Context, s *accessScope, keyID, secretKey string) error {
	data := connectionData(s)
	data[bkv1.AccessSecretKeyAccessKeyID] = []byte(keyID)
	data[bkv1.AccessSecretKeySecretKey] = []byte(secretKey)
	return r.writeSecretData(ctx, s, data)
}

// connectionData is what every access's Secret holds besides its credentials: the
// store's endpoint, region and transport, and the buckets. With the key it is
// bkv1.AccessSecretKeys, all that `kubectl bucketkeeper env` passes on; with a role,
// bkv1.KeylessAccessSecretKeys (TestAccessSecretHoldsOnlyListedKeys).
func connectionData(s *accessScope) map[string][]byte {
	data := map[string][]byte{
		bkv1.AccessSecretKeyRegion:      []byte(stores.Region(s.store)),
		bkv1.AccessSecretKeyEndpoint:    []byte(stores.Endpoint(s.store, stores.Region(s.store))),
		bkv1.AccessSecretKeyBucketNames: []byte(strings.Join(s.names, ",")),
	}
	if len(s.grants) > 0 {
		data[bkv1.AccessSecretKeyBucketName] = []byte(s.grants[0].Bucket)
	}
	stores.AddTransport(data, s.store)
	return data
}

// writeSecretData creates or updates the Secret with data. The Secret is labelled so
// the manager's cache sees it, and controlled by the access so Kubernetes removes it
// with the access.
func (r *Reconciler) writeSecretData(ctx context.Context, s *accessScope, data map[string][]byte) error {
	ba := s.ba
	current := &corev1.Secret{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ba.Namespace, Name: ba.Spec.SecretName}, current)
	if apierrors.IsNotFound(err) {
		want := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ba.Namespace, Name: ba.Spec.SecretName}, Data: data}
		setAccessSecretMeta(want, ba)
		if err := controllerutil.SetControllerReference(ba, want, r.Scheme()); err != nil {
			return err
		}
		if err := r.Create(ctx, want); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return reconcile.Terminalf(bkv1.ReasonSecretConflict, "Secret %q exists and is not managed by this BucketAccess; choose another spec.secretName", ba.Spec.SecretName)
			}
			return err
		}
		return nil
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(current, ba) {
		return reconcile.Terminalf(bkv1.ReasonSecretConflict, "Secret %q exists and is not managed by this BucketAccess; choose another spec.secretName", ba.Spec.SecretName)
	}
	// The cache holds a summary of the Secret (TransformSecret): the digest of its
	// data, and the whole object is read before a write if metadata was left out.
	if current, err = reconcile.LiveSecret(ctx, r.Stores.APIReader, current); err != nil {
		return err
	}
	digest := reconcile.CachedDigest(current)
	before := current.DeepCopy()
	setAccessSecretMeta(current, ba)
	current.Data = data
	if digest == reconcile.ConnectionDataDigest(data) && maps.Equal(before.Labels, current.Labels) {
		return nil
	}
	return r.Update(ctx, current)
}

func setAccessSecretMeta(secret *corev1.Secret, ba *bkv1.BucketAccess) {
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	secret.Labels[bkv1.LabelManagedBy] = bkv1.LabelManagedByValue
	secret.Labels[bkv1.LabelSecretRole] = bkv1.SecretRoleAccess
	secret.Labels[bkv1.LabelBucketAccess] = naming.LabelValue(ba.Name)
}

// deleteAccessSecret removes the Secrets of an access that is going away (its
// spec.secretName, and any an earlier secretName left). Garbage collection would do
// it in a cluster; doing it here also keeps a control plane without a garbage
// collector clean.
func (r *Reconciler) deleteAccessSecret(ctx context.Context, ba *bkv1.BucketAccess) error {
	return r.deleteOwnedSecrets(ctx, ba, "")
}

// pruneEarlierSecrets removes the Secrets an access wrote under an earlier
// spec.secretName once its Secret of the current name holds the key: a renamed
// Secret would otherwise outlive the rename until the access is deleted, holding a
// key the access no longer answers for.
func (r *Reconciler) pruneEarlierSecrets(ctx context.Context, s *accessScope) error {
	return r.deleteOwnedSecrets(ctx, s.ba, s.ba.Spec.SecretName)
}

// deleteOwnedSecrets deletes every access Secret in the access's namespace that the
// access controls, but the one named keep. A Secret it does not control (a
// tenant's, whatever its labels) is never touched.
func (r *Reconciler) deleteOwnedSecrets(ctx context.Context, ba *bkv1.BucketAccess, keep string) error {
	var list corev1.SecretList
	if err := r.List(ctx, &list, client.InNamespace(ba.Namespace), client.MatchingLabels{
		bkv1.LabelSecretRole:   bkv1.SecretRoleAccess,
		bkv1.LabelBucketAccess: naming.LabelValue(ba.Name),
	}); err != nil {
		return err
	}
	names := []string{ba.Spec.SecretName} // read directly too: the cache may not have it yet
	for i := range list.Items {
		if name := list.Items[i].Name; name != ba.Spec.SecretName && metav1.IsControlledBy(&list.Items[i], ba) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		if name == keep {
			continue
		}
		secret := &corev1.Secret{}
		err := r.Get(ctx, types.NamespacedName{Namespace: ba.Namespace, Name: name}, secret)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if !metav1.IsControlledBy(secret, ba) {
			continue
		}
		if err := client.IgnoreNotFound(r.Delete(ctx, secret, client.Preconditions{UID: &secret.UID})); err != nil {
			return err
		}
	}
	return nil
}
