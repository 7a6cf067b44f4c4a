package controller

import (
	"crypto/sha256"
	"encoding/base32"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// cachedDataDigest is the label under which the cached copy of a connection Secret
// carries the digest of the data the cache dropped (see TransformSecret). It exists only
// in the cache: it is computed from the data the API server sent, so nothing written on
// the server can forge it, and it is removed before a cached copy is written back. A
// label rather than an annotation because every connection Secret has labels already:
// no second map per Secret.
const cachedDataDigest = "bucketkeeper.io/cached-data-sha256"

// lastAppliedAnnotation is kubectl's copy of the whole object as last applied: often
// the largest thing in its metadata, and never read by a reconcile.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// TransformStorageBucket strips from cached StorageBuckets what no reconcile reads:
// managedFields and kubectl's last-applied copy. StorageBuckets are only ever patched,
// never updated from the cache, so what is dropped here is never written back. The
// strings many buckets repeat are shared (cache_intern.go).
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

// TransformSecret strips managedFields from every cached Secret and keeps connection
// Secrets as metadata plus the digest of their data: one per bucket, and the reconcile
// only needs to know whether the data is what it would write (connectionDataDigest).
// Credentials Secrets keep their data: the operator reads it.
func TransformSecret() toolscache.TransformFunc {
	return func(in any) (any, error) {
		s, ok := in.(*corev1.Secret)
		if !ok {
			return in, nil
		}
		s.ManagedFields = nil
		if s.Labels[bkv1.LabelSecretRole] == bkv1.SecretRoleConnection {
			s.Labels[cachedDataDigest] = connectionDataDigest(s.Data)
			delete(s.Annotations, lastAppliedAnnotation)
			s.Data, s.StringData = nil, nil
		}
		return s, nil
	}
}

// digestEncoding writes a SHA-256 in 52 lower-case letters and digits: a valid label
// value, should a copy with it ever reach the server (writes remove it).
var digestEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// connectionDataDigest is a SHA-256 over the keys and values in key order, each
// length-prefixed so that no two different maps hash alike.
func connectionDataDigest(data map[string][]byte) string {
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
