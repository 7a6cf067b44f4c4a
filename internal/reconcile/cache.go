package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// lastAppliedAnnotation is kubectl's copy of the whole object as last applied: often
// the largest thing in its metadata, and never read by a
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// TransformStorageBucket strips from cached StorageBuckets what no reconcile reads:
// managedFields and kubectl's last-applied copy. StorageBuckets are only ever patched,
// never updated from the cache, so what is dropped here is never written back. The
// strings many buckets repeat are shared (intern.go).
func TransformStorageBucket() toolscache.TransformFunc {
	return func(in any) (any, error) {
		if sb, ok := in.(*bkv1.StorageBucket); ok {
			cachedStrings.internStorageBucket(sb)
		}
		if obj, err := meta.Accessor(in); err == nil {
			obj.SetManagedFields(nil)
			if a := obj.GetAnnotations(); a[lastAppliedAnnotation] != "" {
				delete(a, lastAppliedAnnotation)
				obj.SetAnnotations(a)
			}
		}
		return in, nil
	}
}

// The cache's view of Secrets. The manager caches every Secret that carries
// bkv1.LabelSecretRole with one of its values, and a tenant can label its own Secrets so:
// whatever a tenant writes into such a Secret must not reach the manager's memory. So a
// cached Secret is a bounded summary of the server's copy, whoever wrote it:
//   - no data, only its digest (bkv1.LabelCachedDataDigest); an access Secret also keeps the key
//     pair it holds while that is key-sized (the reconcile resumes from it);
//   - the operator's own labels, then other labels and annotations up to
//     maxCachedMetadata bytes each, at most maxCachedOwnerRefs owner references, no
//     finalizers or managedFields;
//   - bkv1.LabelCachedTruncated when anything but data was left out, so that a write reads the
//     whole object first (LiveSecret) instead of sending back a shortened copy.
//
// The data of the credentials Secrets ObjectStores name is read from the API server once
// per version (store.Registry.SecretData): those are few and the platform team's.

// Bounds of one cached Secret's metadata besides the operator's own labels: enough for
// what tools and people put on a Secret, small enough that thousands of hostile ones
// cost megabytes, not gigabytes.
const (
	maxCachedMetadata  = 4 << 10 // bytes of other labels, and of annotations
	maxCachedOwnerRefs = 8
	// maxCachedKeyBytes bounds each half of the key pair an access Secret's cached copy
	// keeps: longer than any store's key (AWS: 128 characters), shorter than a payload.
	maxCachedKeyBytes = 256
)

// ownLabels are the labels the operator reads on Secrets; they are kept whatever their
// size (a label value is at most 63 characters).
var ownLabels = []string{bkv1.LabelSecretRole, bkv1.LabelManagedBy, bkv1.LabelStorageBucket, bkv1.LabelBucketAccess}

// TransformSecret turns a Secret from the API server into the bounded summary above.
//
// It is idempotent, as client-go requires of a transform that may see an object twice:
// a reflector that starts with a watch-list (client-go's default) transforms each object
// into its temporary store and again as it replaces the informer's content with that
// store's objects. A second pass over a summary, which has no data, would put the
// digest of empty data in its label: every connection Secret would then look changed
// to a restarted operator, and each sync would rewrite it.
func TransformSecret() toolscache.TransformFunc {
	return func(in any) (any, error) {
		s, ok := in.(*corev1.Secret)
		if !ok || isSummary(s) {
			return in, nil
		}
		return summarizeSecret(s), nil
	}
}

// isSummary says whether s is already a summarizeSecret result: it carries the digest
// label and has no managedFields. The API server records managedFields on every object
// it stores, so a tenant's Secret that copies the label is still summarized afresh.
func isSummary(s *corev1.Secret) bool {
	_, digested := s.Labels[bkv1.LabelCachedDataDigest]
	return digested && len(s.ManagedFields) == 0
}

func summarizeSecret(s *corev1.Secret) *corev1.Secret {
	truncated := false
	labels := make(map[string]string, len(ownLabels)+2)
	for _, k := range ownLabels {
		if v, ok := s.Labels[k]; ok {
			labels[k] = v
		}
	}
	others, cut := boundedMap(s.Labels, func(k string) bool {
		return slices.Contains(ownLabels, k) || k == bkv1.LabelCachedDataDigest || k == bkv1.LabelCachedTruncated
	})
	truncated = truncated || cut
	maps.Copy(labels, others)
	annotations, cut := boundedMap(s.Annotations, func(k string) bool { return k == lastAppliedAnnotation })
	truncated = truncated || cut
	owners := s.OwnerReferences
	if len(owners) > maxCachedOwnerRefs {
		owners, truncated = ownersKept(owners), true
	}
	if len(s.Finalizers) > 0 {
		truncated = true
	}
	labels[bkv1.LabelCachedDataDigest] = ConnectionDataDigest(s.Data)
	if truncated {
		labels[bkv1.LabelCachedTruncated] = "true"
	}
	var data map[string][]byte
	if s.Labels[bkv1.LabelSecretRole] == bkv1.SecretRoleAccess {
		data = keyPairOf(s.Data)
	}
	return &corev1.Secret{
		TypeMeta: s.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion,
			Generation: s.Generation, CreationTimestamp: s.CreationTimestamp, DeletionTimestamp: s.DeletionTimestamp,
			Labels: labels, Annotations: annotations, OwnerReferences: owners,
		},
		Type: s.Type, Immutable: s.Immutable, Data: data,
	}
}

// boundedMap keeps the entries of m, but those skip names, in key order while their
// keys and values add up to at most maxCachedMetadata bytes; cut says whether any
// entry was left out for the bound.
func boundedMap(m map[string]string, skip func(string) bool) (kept map[string]string, cut bool) {
	size := 0
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if skip(k) {
			continue
		}
		size += len(k) + len(m[k])
		if size > maxCachedMetadata {
			return kept, true
		}
		if kept == nil {
			kept = map[string]string{}
		}
		kept[k] = m[k]
	}
	return kept, false
}

// ownersKept keeps the controller reference, then others up to maxCachedOwnerRefs.
func ownersKept(refs []metav1.OwnerReference) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, maxCachedOwnerRefs)
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			out = append(out, r)
		}
	}
	for _, r := range refs {
		if len(out) == maxCachedOwnerRefs {
			break
		}
		if r.Controller == nil || !*r.Controller {
			out = append(out, r)
		}
	}
	return out
}

// keyPairOf keeps an access Secret's key pair when both halves are key-sized.
func keyPairOf(data map[string][]byte) map[string][]byte {
	id, secret := data[bkv1.AccessSecretKeyAccessKeyID], data[bkv1.AccessSecretKeySecretKey]
	if len(id) == 0 || len(secret) == 0 || len(id) > maxCachedKeyBytes || len(secret) > maxCachedKeyBytes {
		return nil
	}
	return map[string][]byte{bkv1.AccessSecretKeyAccessKeyID: id, bkv1.AccessSecretKeySecretKey: secret}
}

// CachedDigest returns the digest of the Secret's data on the server and removes the
// cache's own labels, so that the copy can be changed and written. A copy read past the
// cache has its data, and its digest is computed.
func CachedDigest(s *corev1.Secret) string {
	digest, ok := s.Labels[bkv1.LabelCachedDataDigest]
	if !ok {
		digest = ConnectionDataDigest(s.Data)
	}
	delete(s.Labels, bkv1.LabelCachedDataDigest)
	delete(s.Labels, bkv1.LabelCachedTruncated)
	return digest
}

// LiveSecret returns the whole Secret from the API server when the cached copy left
// metadata out, so that an update never drops what the cache did not hold; otherwise
// the cached copy itself.
func LiveSecret(ctx context.Context, reader client.Reader, cached *corev1.Secret) (*corev1.Secret, error) {
	if cached.Labels[bkv1.LabelCachedTruncated] == "" {
		return cached, nil
	}
	live := &corev1.Secret{}
	if err := reader.Get(ctx, client.ObjectKeyFromObject(cached), live); err != nil {
		return nil, err
	}
	return live, nil
}

// digestEncoding writes a SHA-256 in 52 lower-case letters and digits: a valid label
// value, should a copy with it ever reach the server (writes remove it).
var digestEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ConnectionDataDigest is a SHA-256 over the keys and values in key order, each
// length-prefixed so that no two different maps hash alike.
func ConnectionDataDigest(data map[string][]byte) string {
	h := sha256.New()
	var n [8]byte
	write := func(b []byte) {
		l := uint64(len(b))
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write(b)
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		write([]byte(k))
		write(data[k])
	}
	return digestEncoding.EncodeToString(h.Sum(nil))
}
