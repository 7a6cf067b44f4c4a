package v1alpha1_test

import (
	"fmt"
	"strings"
	"testing"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestLegacyBucketNamesAdmission: guardrails.legacyBucketNames lists names, exact or a
// beginning of at least three characters and '*', each for named namespaces: a blanket
// pattern, a '*' inside a name, a list without namespaces or with a namespace pattern
// are refused; spec.move.bucketName and spec.retire.bucketName take Keep or Lane.
func TestLegacyBucketNamesAdmission(t *testing.T) {
	legacy := func(names, namespaces []any) spec {
		entry := map[string]any{}
		if names != nil {
			entry["names"] = names
		}
		if namespaces != nil {
			entry["namespaces"] = namespaces
		}
		return spec{"guardrails": map[string]any{"legacyBucketNames": []any{entry}}}
	}
	team := []any{"team-a"}
	for i, tc := range []struct {
		name string
		spec spec
		want string
	}{
		{"every name", legacy([]any{"*"}, team), "spec.guardrails.legacyBucketNames[0].names[0]: Invalid value"},
		{"a pattern too short", legacy([]any{"ab*"}, team), "'*' may only end a name, after at least three characters"},
		{"a '*' inside a name", legacy([]any{"acme-*-logs"}, team), "'*' may only end a name"},
		{"a name with uppercase", legacy([]any{"Acme"}, team), "spec.guardrails.legacyBucketNames[0].names[0]: Invalid value"},
		{"no names", legacy([]any{}, team), "names in body should have at least 1 items"},
		{"no namespaces", legacy([]any{"acme-invoices"}, nil), "namespaces: Required value"},
		{"empty namespaces", legacy([]any{"acme-invoices"}, []any{}), "namespaces in body should have at least 1 items"},
		{"a namespace pattern", legacy([]any{"acme-invoices"}, []any{"team-*"}), "spec.guardrails.legacyBucketNames[0].namespaces[0]: Invalid value"},
		{"retire with an unknown bucketName choice", spec{"retire": map[string]any{"into": "ceph", "bucketName": "Rename"}}, `spec.retire.bucketName: Unsupported value: "Rename"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(testCtx(t), objectStore(fmt.Sprintf("legacy-invalid-%d", i), tc.spec))
			assertRejected(t, err, tc.want)
		})
	}

	valid := legacy([]any{"acme-invoices", "acme-reports-*"}, team)
	valid["retire"] = map[string]any{"into": "ceph", "bucketName": string(bkv1.MoveBucketNameLane)}
	if err := k8s.Create(testCtx(t), objectStore("legacy-valid", valid)); err != nil {
		t.Fatalf("a valid legacyBucketNames and retire.bucketName refused: %v", err)
	}

	ns := newNamespace(t)
	move := func(choice string) spec {
		return with(validBucketSpec(), "move", map[string]any{"bucketName": choice})
	}
	assertRejected(t, k8s.Create(testCtx(t), storageBucket(ns, "move-unknown", move("Rename"))), `spec.move.bucketName: Unsupported value: "Rename"`)
	for _, choice := range []bkv1.MoveBucketName{bkv1.MoveBucketNameKeep, bkv1.MoveBucketNameLane} {
		if err := k8s.Create(testCtx(t), storageBucket(ns, "move-"+strings.ToLower(string(choice)), move(string(choice)))); err != nil {
			t.Errorf("spec.move.bucketName %s refused: %v", choice, err)
		}
	}
}
