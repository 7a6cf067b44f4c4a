package operator

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// The cache's per-kind settings must have one entry per kind: ByObject is keyed by
// pointer, so a second entry for a kind is legal Go, and which of the two the cache
// applies would change from run to run. A shard must always get its selector on
// StorageBuckets and BucketAccesses, and the StorageBucket transform with it.
func TestCacheOptionsOneEntryPerKind(t *testing.T) {
	for _, selector := range []string{"", "shard=a", "!isolated"} {
		opts, err := cacheOptions(Options{WatchLabelSelector: selector})
		if err != nil {
			t.Fatalf("%q: %v", selector, err)
		}
		seen := map[schema.GroupVersionKind]int{}
		for obj, by := range opts.ByObject {
			gvk, err := apiutil.GVKForObject(obj, Scheme())
			if err != nil {
				t.Fatal(err)
			}
			seen[gvk]++
			if gvk.Kind != "StorageBucket" && gvk.Kind != "BucketAccess" {
				continue
			}
			if gvk.Kind == "StorageBucket" && by.Transform == nil {
				t.Errorf("%q: the StorageBucket entry has no transform", selector)
			}
			want, _ := labels.Parse(selector)
			if selector == "" {
				want = nil
			}
			if (by.Label == nil) != (want == nil) || by.Label != nil && by.Label.String() != want.String() {
				t.Errorf("%q: the %s entry selects %v, want %v", selector, gvk.Kind, by.Label, want)
			}
		}
		for gvk, n := range seen {
			if n != 1 {
				t.Errorf("%q: %d cache entries for %s, want 1", selector, n, gvk.Kind)
			}
		}
		if selector != "" && seen[bkv1.GroupVersion.WithKind("BucketAccess")] != 1 {
			t.Errorf("%q: no BucketAccess entry: a shard would see every access", selector)
		}
	}
}
