package main

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/remedy"
)

// TestEveryVerbOnAClaimRefusedByAGuardrail: a store whose allowedNamespaces does not
// select the claim's namespace. why names the guardrail and the remedy, and follows
// the access (its key refused) to the bucket; tree says the namespace is not allowed
// and the Secrets are missing; env and probe refuse with the reason instead of
// running or waiting; status counts the refusal.
func TestEveryVerbOnAClaimRefusedByAGuardrail(t *testing.T) {
	f := newFixture(t, nil, func(s *bkv1.ObjectStore) {
		s.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"test.bucketkeeper.io/tenant": "admitted"}}
	})
	sb := f.claim("photos")
	ba := &bkv1.BucketAccess{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "photos-writer"},
		Spec:       bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{{Name: "photos"}}, SecretName: "photos-writer"},
	}
	must(t, k8s.Create(f.ctx, ba))
	f.waitConditions(sb, "Stalled=True/NamespaceNotAllowed", "Ready=False/NamespaceNotAllowed")
	f.waitConditions(ba, "Ready=False/BucketRefused")
	rem, _ := remedy.For(bkv1.ReasonNamespaceNotAllowed)

	t.Run("why", func(t *testing.T) {
		r := plugin(t, f.ns, "why", "photos")
		r.contains(t, "why photos", "StorageBucket "+f.ns+"/photos: Stalled=True NamespaceNotAllowed (a person must act)",
			"Guardrail: spec.allowedNamespaces of ObjectStore "+f.store, "Who:       you or the platform team", rem.Do,
			`namespace "`+f.ns+`" is not allowed to use ObjectStore "`+f.store+`"`)
		if r.code != 0 {
			t.Errorf("why exits 0 whatever it finds\n%s", r)
		}
		r = plugin(t, f.ns, "why", "bucketaccess/photos-writer")
		r.contains(t, "why ba", "BucketAccess "+f.ns+"/photos-writer: Stalled=True BucketRefused", "because",
			"StorageBucket "+f.ns+"/photos: Stalled=True NamespaceNotAllowed", rem.Do)

		r = plugin(t, f.ns, "why", "-o", "json")
		var list struct{ Items []finding }
		if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
			t.Fatalf("why -o json: %v\n%s", err, r)
		}
		if len(list.Items) != 2 {
			t.Fatalf("why -o json: %d findings, want the access's and the bucket's\n%s", len(list.Items), r)
		}
		for _, fd := range list.Items {
			if fd.State != remedy.Blocked {
				t.Errorf("why -o json: %s is %s, want blocked", fd.object(), fd.State)
			}
		}
		if b := list.Items[1]; b.Kind != "StorageBucket" || b.Reason != bkv1.ReasonNamespaceNotAllowed || !strings.HasPrefix(b.Guardrail, "spec.allowedNamespaces") {
			t.Errorf("why -o json: the bucket's finding %+v", b)
		}
	})

	t.Run("tree", func(t *testing.T) {
		r := plugin(t, f.ns, "tree", "photos")
		r.contains(t, "tree", f.ns+" NOT allowed: spec.allowedNamespaces", "NamespaceNotAllowed", "not provisioned yet",
			"Secret/photos-bucket", "Missing", "BucketAccess/photos-writer", "BucketRefused", "Secret/photos-writer")
	})

	t.Run("env", func(t *testing.T) {
		r := plugin(t, f.ns, "env", "photos", "--", "sh", "-c", "echo ran")
		if r.code == 0 || strings.Contains(r.stdout, "ran") {
			t.Errorf("env ran a command without a key\n%s", r)
		}
		r.contains(t, "env", "the Secret "+f.ns+"/photos-writer of BucketAccess photos-writer (of StorageBucket photos) does not exist", "BucketRefused")
	})

	t.Run("probe", func(t *testing.T) {
		r := plugin(t, f.ns, "probe", "photos")
		if r.code == 0 {
			t.Errorf("probe of a refused claim exits 0\n%s", r)
		}
		r.contains(t, "probe", "has no bucket to probe yet", "NamespaceNotAllowed")
	})

	t.Run("status", func(t *testing.T) {
		r := plugin(t, "", "status", f.store, "-o", "json")
		var st storeStatus
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("status -o json: %v\n%s", err, r)
		}
		if len(st.Buckets) != 1 || st.Buckets[0].Reason != bkv1.ReasonNamespaceNotAllowed || st.Buckets[0].Examples[0] != f.ns+"/photos" ||
			st.Totals.Accesses != 1 || st.Totals.Keys != 0 {
			t.Errorf("status -o json: %+v", st)
		}
	})
}
