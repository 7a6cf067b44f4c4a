package reconcile

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// Every cached StorageBucket is decoded on its own, so the strings thousands of them
// share (condition types, reasons and statuses, the namespace, enum values) are each
// held thousands of times. The cache transform swaps them for one shared copy; strings
// are immutable, so sharing cannot change what any reader sees.
// BenchmarkCachedStorageBucketHeap measures the saving against the plain decode.
//
// Only strings from small sets a tenant cannot extend enter the table: what the API
// server fixes (apiVersion, kind), namespaces (the platform team's), spec fields the
// CRD restricts to an enum, and conditions, which only the operator writes. Free-form
// fields a tenant writes (labels, tags, the store's name, the region, finalizers) are
// left as decoded: a tenant could otherwise fill the table with values of its own and
// turn the sharing off for everyone else. Our own finalizer is shared through its
// constant, without the table.

// internTableSize bounds the table: the fields interned come from small sets
// (namespaces are the largest), and once the table is full strings are kept as
// decoded, so even a cluster with endless namespaces costs a fixed amount.
const internTableSize = 4096

// internTable holds one copy of each string it was given, up to its size.
type internTable struct {
	mu      sync.Mutex
	strings map[string]string
}

// cachedStrings is the table of the StorageBucket cache transform.
var cachedStrings = &internTable{}

// intern returns the table's copy of s, adding s while there is room.
func (t *internTable) intern(s string) string {
	if s == "" {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.strings[s]; ok {
		return v
	}
	if t.strings == nil {
		t.strings = make(map[string]string, 64)
	}
	if len(t.strings) < internTableSize {
		t.strings[s] = s
	}
	return s
}

// internStorageBucket makes sb share the strings it repeats with other cached
// StorageBuckets, and the ones it repeats within itself.
func (t *internTable) internStorageBucket(sb *bkv1.StorageBucket) {
	sb.APIVersion, sb.Kind = t.intern(sb.APIVersion), t.intern(sb.Kind)
	sb.Namespace = t.intern(sb.Namespace)
	for i, f := range sb.Finalizers {
		if f == bkv1.Finalizer {
			sb.Finalizers[i] = bkv1.Finalizer
		}
	}

	spec := &sb.Spec
	spec.Versioning = bkv1.VersioningState(t.intern(string(spec.Versioning)))
	spec.PublicAccess = bkv1.PublicAccess(t.intern(string(spec.PublicAccess)))
	spec.DeletionPolicy = bkv1.DeletionPolicy(t.intern(string(spec.DeletionPolicy)))
	spec.Adoption = bkv1.AdoptionPolicy(t.intern(string(spec.Adoption)))
	spec.Probe.Mode = bkv1.ProbeMode(t.intern(string(spec.Probe.Mode)))
	spec.Access = t.intern(spec.Access)

	status := &sb.Status
	for i := range status.Conditions {
		c := &status.Conditions[i]
		c.Type, c.Reason = t.intern(c.Type), t.intern(c.Reason)
		c.Status = metav1.ConditionStatus(t.intern(string(c.Status)))
	}
	if ci := status.CreateIntent; ci != nil {
		if ci.BucketName == status.BucketName {
			ci.BucketName = status.BucketName
		}
		if ci.UID == sb.UID {
			ci.UID = sb.UID
		}
	}
}
