package main

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestEveryVerbOnAStoreOutage: a Ready, keyed claim whose SeaweedFS stops. The claim
// stays Ready with Available Unknown; why says so and follows it to the store, which
// the platform team must look at; probe gets no verdict within its timeout and exits
// 1 naming the outage; tree and status show it; env still hands out the Secret.
func TestEveryVerbOnAStoreOutage(t *testing.T) {
	srv := testenv.NewS3(t, testenv.SeaweedFS)
	f := newFixture(t, srv)
	sb := f.claim("photos", func(sb *bkv1.StorageBucket) { sb.Spec.Access = string(bkv1.AccessReadWrite) })
	f.waitConditions(sb, "Ready=True", "Available=True")
	f.waitConditions(&bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "photos"}}, "Ready=True/Ready")

	must(t, srv.Stop())
	// Cleanups run last-in first-out: the store is back before the fixture's deletes
	// the access, whose identity is deleted on it.
	t.Cleanup(func() {
		if err := srv.Start(); err != nil {
			t.Errorf("restarting SeaweedFS: %v", err)
		}
	})
	f.waitConditions(&bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}}, "Ready=False/StoreUnreachable")
	f.waitConditions(sb, "Ready=True", "Available=Unknown/StoreUnreachable")

	t.Run("why", func(t *testing.T) {
		r := plugin(t, f.ns, "why", "photos")
		r.contains(t, "why", "StorageBucket "+f.ns+"/photos: Available=Unknown StoreUnreachable (the operator is at it, or waits)",
			"because", "ObjectStore "+f.store+": Ready=False StoreUnreachable", "Who:       the platform team", "The platform team checks the store")
	})

	t.Run("tree", func(t *testing.T) {
		r := plugin(t, f.ns, "tree", "photos", "-o", "json")
		var root node
		if err := json.Unmarshal([]byte(r.stdout), &root); err != nil {
			t.Fatalf("tree -o json: %v\n%s", err, r)
		}
		got := map[string]string{}
		for _, c := range root.Children {
			got[c.Kind] = c.Status + "/" + c.Reason
		}
		if root.Status != "True" || got["ObjectStore"] != "False/StoreUnreachable" || got["Bucket"] != "Unknown/StoreUnreachable" {
			t.Errorf("tree during an outage: claim %s, children %v", root.Status, got)
		}
	})

	t.Run("probe", func(t *testing.T) {
		r := plugin(t, f.ns, "probe", "photos", "--timeout", "4s")
		if r.code != 1 {
			t.Errorf("probe during an outage: want exit 1\n%s", r)
		}
		r.contains(t, "probe", "StoreUnreachable")
	})

	t.Run("status", func(t *testing.T) {
		r := plugin(t, "", "status", f.store)
		r.contains(t, "status", "ObjectStore "+f.store+": Ready=False StoreUnreachable", "StoreUnreachable   1")
	})

	t.Run("env", func(t *testing.T) {
		r := plugin(t, f.ns, "env", "photos", "--", "sh", "-c", `test -n "$AWS_SECRET_ACCESS_KEY" && echo "$BUCKET_NAME"`)
		if r.code != 0 || r.stdout != sb.Status.BucketName+"\n" {
			t.Errorf("env during an outage: want the Secret's bucket name\n%s", r)
		}
	})
}
