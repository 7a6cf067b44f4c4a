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

// TestObjectStoreAccessProviderAdmission: iam settings only with type IAM; iam.api
// AWS or MinIO, and MinIO without keyless access.
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
	assertRejected(t, k8s.Create(testCtx(t), objectStore("ap-unknown-api", base(map[string]any{"type": "IAM", "iam": map[string]any{"api": "Ceph"}}))),
		`supported values: "AWS", "MinIO"`)
	assertRejected(t, k8s.Create(testCtx(t), objectStore("ap-minio-keyless", base(map[string]any{"type": "IAM", "iam": map[string]any{"api": "MinIO"},
		"webIdentity": map[string]any{"issuer": "https://oidc.example.com/cluster", "audience": "s3.example.com"}}))),
		"accessProvider.webIdentity is not available with iam.api MinIO")
	if err := k8s.Create(testCtx(t), objectStore("ap-minio", base(map[string]any{"type": "IAM", "iam": map[string]any{"api": "MinIO"}}))); err != nil {
		t.Fatalf("a valid MinIO store was refused: %v", err)
	}
	store := objectStore("ap-iam", base(map[string]any{"type": "IAM", "iam": map[string]any{"endpoint": "http://127.0.0.1:7071"}}))
	if err := k8s.Create(testCtx(t), store); err != nil {
		t.Fatalf("a valid IAM store was refused: %v", err)
	}
	region, _, _ := unstructured.NestedString(store.Object, "spec", "accessProvider", "iam", "region")
	if region != "us-east-1" {
		t.Errorf("default IAM region = %q, want us-east-1", region)
	}
}

// TestBucketAccessServiceAccountAdmission: a BucketAccess names a ServiceAccount of its
// own namespace by name only, so no form of another namespace's ServiceAccount passes;
// it holds no key to rotate, and it never changes between a key and a ServiceAccount.
func TestBucketAccessServiceAccountAdmission(t *testing.T) {
	ns := newNamespace(t)
	keyless := func() spec { return with(validAccessSpec(), "serviceAccountName", "app") } // with changes its map
	for i, name := range []string{"victim:app", "system:serviceaccount:victim:app", "victim/app", "App", "-app", ""} {
		assertRejected(t, k8s.Create(testCtx(t), bucketAccess(ns, fmt.Sprintf("sa-%d", i), with(validAccessSpec(), "serviceAccountName", name))),
			"serviceAccountName must be the name of a ServiceAccount of this namespace")
	}
	assertRejected(t, k8s.Create(testCtx(t), bucketAccess(ns, "sa-rotated", with(keyless(), "rotation", map[string]any{"every": "720h"}))),
		"rotation does not apply to a BucketAccess for a ServiceAccount")

	ba := bucketAccess(ns, "keyless", keyless())
	if err := k8s.Create(testCtx(t), ba); err != nil {
		t.Fatalf("a valid keyless access was refused: %v", err)
	}
	for _, change := range []func(*unstructured.Unstructured){
		func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "other", "spec", "serviceAccountName")
		},
		func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "spec", "serviceAccountName")
		},
	} {
		u := ba.DeepCopy()
		change(u)
		assertRejected(t, k8s.Update(testCtx(t), u), "serviceAccountName is immutable")
	}
	keyed := bucketAccess(ns, "keyed", validAccessSpec())
	if err := k8s.Create(testCtx(t), keyed); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(keyed.Object, "app", "spec", "serviceAccountName")
	assertRejected(t, k8s.Update(testCtx(t), keyed), "serviceAccountName is immutable")
}

// TestObjectStoreWebIdentityAdmission: keyless settings only with type IAM, an https
// issuer, thumbprints of 40 hex digits, sessions between 1h and 12h; the session
// defaults to 1h.
func TestObjectStoreWebIdentityAdmission(t *testing.T) {
	web := func(w map[string]any) map[string]any {
		out := map[string]any{"issuer": "https://oidc.example.com/cluster", "audience": "s3.example.com"}
		for k, v := range w {
			out[k] = v
		}
		return out
	}
	base := func(typ string, w map[string]any) spec {
		return spec{"endpoint": "http://127.0.0.1:7070", "accessProvider": map[string]any{"type": typ, "webIdentity": w}}
	}
	cases := []struct {
		name string
		spec spec
		want string
	}{
		{"static", base("Static", web(nil)), "accessProvider.webIdentity may only be set when type is IAM"},
		{"http issuer", base("IAM", web(map[string]any{"issuer": "http://oidc.example.com"})), "webIdentity.issuer must be an https URL"},
		{"issuer with a query", base("IAM", web(map[string]any{"issuer": "https://oidc.example.com/?x=1"})), "webIdentity.issuer must be an https URL"},
		{"no audience", base("IAM", map[string]any{"issuer": "https://oidc.example.com"}), "audience: Required value"},
		{"short thumbprint", base("IAM", web(map[string]any{"thumbprints": []any{"abc"}})), "should match '^[0-9a-fA-F]{40}$'"},
		{"six thumbprints", base("IAM", web(map[string]any{"thumbprints": []any{"0000000000000000000000000000000000000001",
			"0000000000000000000000000000000000000002", "0000000000000000000000000000000000000003", "0000000000000000000000000000000000000004",
			"0000000000000000000000000000000000000005", "0000000000000000000000000000000000000006"}})), "must have at most 5 items"},
		{"session of 30m", base("IAM", web(map[string]any{"maxSessionDuration": "30m"})), "webIdentity.maxSessionDuration must be between 1h and 12h"},
		{"session of a day", base("IAM", web(map[string]any{"maxSessionDuration": "24h"})), "webIdentity.maxSessionDuration must be between 1h and 12h"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertRejected(t, k8s.Create(testCtx(t), objectStore(fmt.Sprintf("web-invalid-%d", i), tc.spec)), tc.want)
		})
	}
	store := objectStore("web-valid", base("IAM", web(map[string]any{"thumbprints": []any{"9e99a48a9960b14926bb7f3b02e22da2b0ab7280"}})))
	if err := k8s.Create(testCtx(t), store); err != nil {
		t.Fatalf("a valid keyless store was refused: %v", err)
	}
	if d, _, _ := unstructured.NestedString(store.Object, "spec", "accessProvider", "webIdentity", "maxSessionDuration"); d != "1h" {
		t.Errorf("default maxSessionDuration = %q, want 1h", d)
	}
}
