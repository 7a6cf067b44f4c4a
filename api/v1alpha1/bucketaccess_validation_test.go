package v1alpha1_test

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func bucketAccess(ns, name string, s spec) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bucketkeeper.io/v1alpha1",
		"kind":       "BucketAccess",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       s,
	}}
}

func validAccessSpec() spec {
	return spec{"buckets": []any{map[string]any{"name": "reports"}}, "secretName": "reports-app"}
}

func grants(n int) []any {
	out := make([]any, 0, n)
	for i := range n {
		out = append(out, map[string]any{"name": fmt.Sprintf("b%d", i)})
	}
	return out
}

// TestBucketAccessAdmission: invalid accesses are refused with a message that says
// what is wrong; a valid one is accepted with its defaults.
func TestBucketAccessAdmission(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name string
		spec spec
		want string
	}{
		{"no buckets", with(validAccessSpec(), "buckets", []any{}), "should have at least 1 items"},
		{"more than 10 buckets", with(validAccessSpec(), "buckets", grants(11)), "must have at most 10 items"},
		{"unknown mode", with(validAccessSpec(), "buckets", []any{map[string]any{"name": "b", "mode": "Admin"}}), `supported values: "ReadWrite", "ReadOnly"`},
		{"same bucket twice", with(validAccessSpec(), "buckets", []any{map[string]any{"name": "b"}, map[string]any{"name": "b", "mode": "ReadOnly"}}), "Duplicate value"},
		{"missing secret name", spec{"buckets": grants(1)}, "spec.secretName: Required value"},
		{"invalid secret name", with(validAccessSpec(), "secretName", "Bad_Name"), "secretName must be a valid Secret name"},
		{"rotation below 1h", with(validAccessSpec(), "rotation", map[string]any{"every": "30m"}), "rotation.every must be at least 1h"},
		{"rotation that is no duration", with(validAccessSpec(), "rotation", map[string]any{"every": "monthly"}), "rotation.every must be a duration"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertRejected(t, k8s.Create(testCtx(t), bucketAccess(ns, fmt.Sprintf("invalid-%d", i), tc.spec)), tc.want)
		})
	}

	ok := bucketAccess(ns, "valid", with(validAccessSpec(), "rotation", map[string]any{"every": "720h"}))
	if err := k8s.Create(testCtx(t), ok); err != nil {
		t.Fatalf("a valid access was refused: %v", err)
	}
	mode, _, _ := unstructured.NestedSlice(ok.Object, "spec", "buckets")
	if got := mode[0].(map[string]any)["mode"]; got != "ReadWrite" {
		t.Errorf("default mode = %v, want ReadWrite", got)
	}
}

// TestObjectStoreAccessProviderAdmission: iam settings only with type IAM.
func TestObjectStoreAccessProviderAdmission(t *testing.T) {
	base := func(provider map[string]any) spec {
		return spec{"endpoint": "http://127.0.0.1:7070", "accessProvider": provider}
	}
	assertRejected(t, k8s.Create(testCtx(t), objectStore("ap-static-with-iam", base(map[string]any{"type": "Static", "iam": map[string]any{}}))),
		"accessProvider.iam may only be set when type is IAM")
	assertRejected(t, k8s.Create(testCtx(t), objectStore("ap-unknown", base(map[string]any{"type": "Magic"}))),
		`supported values: "IAM", "Static", "None"`)
	assertRejected(t, k8s.Create(testCtx(t), objectStore("ap-bad-endpoint", base(map[string]any{"type": "IAM", "iam": map[string]any{"endpoint": "ftp://x"}}))),
		"iam.endpoint must be an http:// or https:// URL")
	store := objectStore("ap-iam", base(map[string]any{"type": "IAM", "iam": map[string]any{"endpoint": "http://127.0.0.1:7071"}}))
	if err := k8s.Create(testCtx(t), store); err != nil {
		t.Fatalf("a valid IAM store was refused: %v", err)
	}
	region, _, _ := unstructured.NestedString(store.Object, "spec", "accessProvider", "iam", "region")
	if region != "us-east-1" {
		t.Errorf("default IAM region = %q, want us-east-1", region)
	}
}
