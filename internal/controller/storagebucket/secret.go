package storagebucket

import (
	"context"
	"maps"
	"net/url"
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

func connectionSecretName(sb *bkv1.StorageBucket) string {
	if sb.Spec.ConnectionSecret.Name != "" {
		return sb.Spec.ConnectionSecret.Name
	}
	return sb.Name + "-bucket"
}

// reconcileConnectionSecret writes the Secret applications mount. It is a controlled
// child with a deterministic name, so Kubernetes garbage-collects it with the claim. A
// Secret of that name that this claim does not control is never overwritten.
func (r *Reconciler) reconcileConnectionSecret(ctx context.Context, scope *bucketScope) error {
	sb := scope.sb
	data, err := r.connectionData(ctx, scope)
	if err != nil {
		return err
	}
	name := connectionSecretName(sb)
	want := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sb.Namespace, Name: name}}

	current := &corev1.Secret{}
	err = r.Get(ctx, client.ObjectKeyFromObject(want), current)
	switch {
	case apierrors.IsNotFound(err):
		setConnectionMeta(want, sb)
		if err := controllerutil.SetControllerReference(sb, want, r.Scheme()); err != nil {
			return err
		}
		want.Data = data
		if err := r.Create(ctx, want); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// Not in our cache, so not labelled as ours: someone else's Secret.
				return reconcile.Terminalf(bkv1.ReasonConnectionSecretConflict, "Secret %q already exists and is not managed by this StorageBucket; set spec.connectionSecret.name to another name", name)
			}
			return err
		}
		scope.secretVersion = want.ResourceVersion
	case err != nil:
		return err
	case !metav1.IsControlledBy(current, sb) && !leftByEarlierIncarnation(current, sb):
		return reconcile.Terminalf(bkv1.ReasonConnectionSecretConflict, "Secret %q is controlled by another object; set spec.connectionSecret.name to another name", name)
	default:
		// The cache keeps Secrets without their data, with its digest instead
		// (TransformSecret); a copy that left metadata out is read whole before it
		// is written.
		if current, err = reconcile.LiveSecret(ctx, r.Stores.APIReader, current); err != nil {
			return err
		}
		digest := reconcile.CachedDigest(current)
		before := current.DeepCopy()
		setConnectionMeta(current, sb)
		if !metav1.IsControlledBy(current, sb) {
			current.OwnerReferences = nil
			if err := controllerutil.SetControllerReference(sb, current, r.Scheme()); err != nil {
				return err
			}
		}
		current.Data = data
		if digest != reconcile.ConnectionDataDigest(data) ||
			!maps.Equal(before.Labels, current.Labels) || len(before.OwnerReferences) != len(current.OwnerReferences) || !metav1.IsControlledBy(before, sb) {
			if err := r.Update(ctx, current); err != nil {
				return err
			}
		}
		scope.secretVersion = current.ResourceVersion
	}
	sb.Status.ConnectionSecretName = name
	return r.deleteStaleConnectionSecrets(ctx, sb, name)
}

// leftByEarlierIncarnation: the Secret was written for an earlier StorageBucket of the
// same namespace and name (namespace/name is unique at any moment, so that one is gone)
// and garbage collection has not removed it yet. It is this claim's to take over.
func leftByEarlierIncarnation(s *corev1.Secret, sb *bkv1.StorageBucket) bool {
	owner := metav1.GetControllerOf(s)
	return owner != nil && owner.Kind == "StorageBucket" && owner.Name == sb.Name && owner.UID != sb.UID &&
		strings.HasPrefix(owner.APIVersion, bkv1.GroupVersion.Group+"/") &&
		s.Labels[bkv1.LabelManagedBy] == bkv1.LabelManagedByValue
}

// deleteConnectionSecrets removes the connection Secrets of a StorageBucket that is
// going away. Garbage collection would do it in a cluster; doing it here also keeps a
// control plane without a garbage collector (make dev) clean.
func (r *Reconciler) deleteConnectionSecrets(ctx context.Context, sb *bkv1.StorageBucket) error {
	return r.deleteStaleConnectionSecrets(ctx, sb, "")
}

func setConnectionMeta(s *corev1.Secret, sb *bkv1.StorageBucket) {
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[bkv1.LabelManagedBy] = bkv1.LabelManagedByValue
	s.Labels[bkv1.LabelSecretRole] = bkv1.SecretRoleConnection
	s.Labels[bkv1.LabelStorageBucket] = naming.LabelValue(sb.Name)
}

// deleteStaleConnectionSecrets removes Secrets this claim wrote under an earlier
// spec.connectionSecret.name.
func (r *Reconciler) deleteStaleConnectionSecrets(ctx context.Context, sb *bkv1.StorageBucket, keep string) error {
	list := &corev1.SecretList{}
	if err := r.List(ctx, list, client.InNamespace(sb.Namespace), client.MatchingLabels{bkv1.LabelStorageBucket: naming.LabelValue(sb.Name), bkv1.LabelSecretRole: bkv1.SecretRoleConnection}); err != nil {
		return err
	}
	for i := range list.Items {
		s := &list.Items[i]
		if s.Name != keep && metav1.IsControlledBy(s, sb) {
			if err := r.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}

// connectionData builds the Secret's data. Access keys are included only from a Secret
// the store names for applications, and only with the Static access provider; the
// operator's own credentials are never copied. Every key is one of
// bkv1.ConnectionSecretKeys, all that `kubectl bucketkeeper env` passes on
// (TestConnectionSecretHoldsOnlyListedKeys).
func (r *Reconciler) connectionData(ctx context.Context, scope *bucketScope) (map[string][]byte, error) {
	endpoint := stores.Endpoint(scope.store, scope.region)
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, reconcile.Terminalf(bkv1.ReasonObjectStoreNotReady, "ObjectStore %q has an unparsable endpoint", scope.store.Name)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	data := map[string][]byte{
		bkv1.SecretKeyBucketName:     []byte(scope.bucket),
		bkv1.SecretKeyBucketRegion:   []byte(scope.region),
		bkv1.SecretKeyBucketEndpoint: []byte(endpoint),
		bkv1.SecretKeyBucketHost:     []byte(u.Hostname()),
		bkv1.SecretKeyBucketPort:     []byte(port),
		bkv1.SecretKeyAWSRegion:      []byte(scope.region),
		bkv1.SecretKeyAWSEndpointS3:  []byte(endpoint),
	}
	stores.AddTransport(data, scope.store)
	ref := scope.store.Spec.ApplicationCredentialsSecretRef
	if ref == nil || stores.AccessProviderOf(scope.store) != bkv1.AccessProviderStatic {
		return data, nil // IAM keys go to BucketAccess Secrets; None means no keys
	}
	app, err := r.Stores.SecretData(ctx, ref)
	if err != nil {
		return nil, err
	}
	scope.appCredentialsVersion = app.ResourceVersion
	id, secret := app.Data[bkv1.CredentialsKeyAccessKeyID], app.Data[bkv1.CredentialsKeySecretAccessKey]
	if len(id) == 0 || len(secret) == 0 {
		return nil, reconcile.Terminalf(bkv1.ReasonCredentialsMissing, "application credentials Secret %s must have the keys %s and %s",
			types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, bkv1.CredentialsKeyAccessKeyID, bkv1.CredentialsKeySecretAccessKey)
	}
	data[bkv1.SecretKeyAWSAccessKeyID], data[bkv1.SecretKeyAWSSecretKey] = id, secret
	if token := app.Data[bkv1.CredentialsKeySessionToken]; len(token) > 0 {
		data[bkv1.SecretKeyAWSSessionToken] = token
	}
	return data, nil
}
