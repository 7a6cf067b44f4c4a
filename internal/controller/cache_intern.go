package controller

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// Every cached StorageBucket is decoded on its own, so the strings thousands of them
// share (condition types, reasons and statuses, the namespace, the finalizer, enum
// values, the store's name and endpoint, label and tag keys) are each held thousands
// of times. The cache transform swaps them for one shared copy; strings are immutable,
// so sharing cannot change what any reader sees. BenchmarkCachedStorageBucketHeap
// measures the saving against the plain decode.

// internTableSize bounds the table: the fields interned come from small sets
// (namespaces and stores are the largest), and once the table is full strings are
// kept as decoded, so a cluster with endless distinct values costs a fixed amount.
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

// internMap returns m with interned keys and values; the map is rebuilt (so that its
// keys are the shared copies) only when it has any entry.
func (t *internTable) internMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[t.intern(k)] = t.intern(v)
	}
	return out
}

// internStorageBucket makes sb share the strings it repeats with other cached
// StorageBuckets, and the ones it repeats within itself.
func (t *internTable) internStorageBucket(sb *bkv1.StorageBucket) {
	sb.APIVersion, sb.Kind = t.intern(sb.APIVersion), t.intern(sb.Kind)
	sb.Namespace = t.intern(sb.Namespace)
	for i, f := range sb.Finalizers {
		sb.Finalizers[i] = t.intern(f)
	}
	sb.Labels = t.internMap(sb.Labels)

	spec := &sb.Spec
	spec.ObjectStoreRef.Name = t.intern(spec.ObjectStoreRef.Name)
	spec.Region = t.intern(spec.Region)
	spec.Versioning = bkv1.VersioningState(t.intern(string(spec.Versioning)))
	spec.PublicAccess = bkv1.PublicAccess(t.intern(string(spec.PublicAccess)))
	spec.DeletionPolicy = bkv1.DeletionPolicy(t.intern(string(spec.DeletionPolicy)))
	spec.Adoption = bkv1.AdoptionPolicy(t.intern(string(spec.Adoption)))
	spec.Probe.Mode = bkv1.ProbeMode(t.intern(string(spec.Probe.Mode)))
	spec.Access = t.intern(spec.Access)
	spec.Tags = t.internMap(spec.Tags)

	status := &sb.Status
	for i := range status.Conditions {
		c := &status.Conditions[i]
		c.Type, c.Reason = t.intern(c.Type), t.intern(c.Reason)
		c.Status = metav1.ConditionStatus(t.intern(string(c.Status)))
	}
	status.Endpoint, status.Region = t.intern(status.Endpoint), t.intern(status.Region)
	if ci := status.CreateIntent; ci != nil {
		if ci.BucketName == status.BucketName {
			ci.BucketName = status.BucketName
		}
		if ci.UID == sb.UID {
			ci.UID = sb.UID
		}
	}
	if a := status.Applied; a != nil {
		for i, k := range a.TagKeys {
			a.TagKeys[i] = t.intern(k)
		}
	}
}
