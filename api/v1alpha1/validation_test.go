package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// spec is a JSON-shaped spec; tests build invalid ones from valid ones by mutation, so
// each case shows only what makes it wrong.
type spec = map[string]any

func storageBucket(ns, name string, s spec) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bucketkeeper.io/v1alpha1",
		"kind":       "StorageBucket",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       s,
	}}
	return u
}

func objectStore(name string, s spec) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bucketkeeper.io/v1alpha1",
		"kind":       "ObjectStore",
		"metadata":   map[string]any{"name": name},
		"spec":       s,
	}}
}

func validBucketSpec() spec {
	return spec{"objectStoreRef": map[string]any{"name": "local"}}
}

func with(s spec, key string, value any) spec {
	s[key] = value
	return s
}

func manyTags(n int) map[string]any {
	tags := map[string]any{}
	for i := range n {
		tags[fmt.Sprintf("k%d", i)] = "v"
	}
	return tags
}

func rule(fields map[string]any) map[string]any {
	r := map[string]any{"id": "r1"}
	for k, v := range fields {
		r[k] = v
	}
	return r
}

// TestStorageBucketAdmissionRejectsInvalidSpecs creates each invalid spec and expects
// the API server to refuse it with a message that tells a person what is wrong.
func TestStorageBucketAdmissionRejectsInvalidSpecs(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name string
		spec spec
		want string
	}{
		{"bucket name too short", with(validBucketSpec(), "bucketName", "ab"), "bucketName must be at least 3 characters long"},
		{"bucket name too long", with(validBucketSpec(), "bucketName", strings.Repeat("a", 64)), "may not be more than 63"},
		{"bucket name with uppercase", with(validBucketSpec(), "bucketName", "MyBucket"), "may contain only lowercase letters, digits, '.' and '-'"},
		{"bucket name with underscore", with(validBucketSpec(), "bucketName", "my_bucket"), "may contain only lowercase letters, digits, '.' and '-'"},
		{"bucket name starting with a hyphen", with(validBucketSpec(), "bucketName", "-bucket"), "must start and end with a letter or digit"},
		{"bucket name ending with a period", with(validBucketSpec(), "bucketName", "bucket."), "must start and end with a letter or digit"},
		{"bucket name with adjacent periods", with(validBucketSpec(), "bucketName", "my..bucket"), "must not contain two adjacent periods"},
		{"bucket name shaped like an IP address", with(validBucketSpec(), "bucketName", "192.168.1.10"), "must not be formatted as an IPv4 address"},
		{"bucket name with xn-- prefix", with(validBucketSpec(), "bucketName", "xn--bucket"), "must not start with 'xn--' or 'sthree-'"},
		{"bucket name with sthree- prefix", with(validBucketSpec(), "bucketName", "sthree-bucket"), "must not start with 'xn--' or 'sthree-'"},
		{"bucket name with -s3alias suffix", with(validBucketSpec(), "bucketName", "bucket-s3alias"), "must not end with '-s3alias' or '--ol-s3'"},
		{"bucket name with --ol-s3 suffix", with(validBucketSpec(), "bucketName", "bucket--ol-s3"), "must not end with '-s3alias' or '--ol-s3'"},
		{"missing objectStoreRef", spec{}, "spec.objectStoreRef: Required value"},
		{"empty objectStoreRef name", spec{"objectStoreRef": map[string]any{"name": ""}}, "spec.objectStoreRef.name: Invalid value: \"\": spec.objectStoreRef.name in body should be at least 1 chars long"},
		{"unknown versioning state", with(validBucketSpec(), "versioning", "On"), `spec.versioning: Unsupported value: "On": supported values: "Enabled", "Suspended"`},
		{"unknown deletion policy", with(validBucketSpec(), "deletionPolicy", "Destroy"), `supported values: "Retain", "Delete", "Purge"`},
		{"unknown adoption policy", with(validBucketSpec(), "adoption", "Always"), `supported values: "Never", "IfUnowned"`},
		{"unknown public access", with(validBucketSpec(), "publicAccess", "Open"), `supported values: "Blocked", "Allowed"`},
		{"unknown probe mode", with(validBucketSpec(), "probe", map[string]any{"mode": "Get"}), `supported values: "Head", "ReadWrite"`},
		{"probe interval below 10s", with(validBucketSpec(), "probe", map[string]any{"interval": "5s", "timeout": "2s"}), "probe.interval must be between 10s and 24h"},
		{"probe interval above 24h", with(validBucketSpec(), "probe", map[string]any{"interval": "48h"}), "probe.interval must be between 10s and 24h"},
		{"probe timeout not shorter than interval", with(validBucketSpec(), "probe", map[string]any{"interval": "1m", "timeout": "2m"}), "probe.timeout must be shorter than probe.interval"},
		{"probe timeout below 1s", with(validBucketSpec(), "probe", map[string]any{"timeout": "500ms"}), "probe.timeout must be at least 1s"},
		{"probe interval that is no duration", with(validBucketSpec(), "probe", map[string]any{"interval": "soon"}), "must be a duration such as 30s, 5m or 1h"},
		{"more than 47 tags (S3's 50 less bucketkeeper's 3)", with(validBucketSpec(), "tags", manyTags(48)), "spec.tags: Too many: 48: must have at most 47 items"},
		{"tag key too long", with(validBucketSpec(), "tags", map[string]any{strings.Repeat("k", 129): "v"}), "tag keys must be 1 to 128 characters long"},
		{"tag value too long", with(validBucketSpec(), "tags", map[string]any{"k": strings.Repeat("v", 257)}), "tag values must be at most 256 characters long"},
		{"reserved bucketkeeper tag", with(validBucketSpec(), "tags", map[string]any{"bucketkeeper.io/claim": "x/y"}), "tag keys starting with 'bucketkeeper.io/' or 'aws:' are reserved"},
		{"reserved aws tag", with(validBucketSpec(), "tags", map[string]any{"aws:createdBy": "me"}), "tag keys starting with 'bucketkeeper.io/' or 'aws:' are reserved"},
		{"lifecycle days below 1", with(validBucketSpec(), "lifecycle", map[string]any{"rules": []any{rule(map[string]any{"expirationDays": 0})}}), "expirationDays in body should be greater than or equal to 1"},
		{"lifecycle rule without action", with(validBucketSpec(), "lifecycle", map[string]any{"rules": []any{rule(map[string]any{"prefix": "tmp/"})}}), "a lifecycle rule needs at least one of expirationDays"},
		{"lifecycle rules with the same id", with(validBucketSpec(), "lifecycle", map[string]any{"rules": []any{rule(map[string]any{"expirationDays": 1}), rule(map[string]any{"expirationDays": 2})}}), "Duplicate value"},
		{"policy that is not a JSON object", with(validBucketSpec(), "policy", `{"Version":"2012-10-17"}`), "spec.policy: Invalid value: \"string\": spec.policy in body must be of type object"},
		{"connection secret name invalid", with(validBucketSpec(), "connectionSecret", map[string]any{"name": "Bad_Name"}), "connectionSecret.name must be a valid Secret name"},
		{"region with uppercase", with(validBucketSpec(), "region", "US_EAST"), "region may contain only lowercase letters, digits and '-'"},
		{"object lock with versioning suspended", with(with(validBucketSpec(), "objectLock", map[string]any{}), "versioning", "Suspended"), "objectLock needs versioning Enabled (or unset)"},
		{"retention with days and years", with(validBucketSpec(), "objectLock", lock("Governance", "days", 1, "years", 1)), "a retention needs exactly one of days or years"},
		{"retention without a period", with(validBucketSpec(), "objectLock", lock("Governance")), "a retention needs exactly one of days or years"},
		{"retention of 0 days", with(validBucketSpec(), "objectLock", lock("Governance", "days", 0)), "days in body should be greater than or equal to 1"},
		{"retention over 100 years", with(validBucketSpec(), "objectLock", lock("Compliance", "years", 101)), "years in body should be less than or equal to 100"},
		{"unknown retention mode", with(validBucketSpec(), "objectLock", lock("Legal", "days", 1)), `supported values: "Governance", "Compliance"`},
		{"ReadWrite probe with a default retention", with(with(validBucketSpec(), "objectLock", lock("Governance", "days", 1)), "probe", map[string]any{"mode": "ReadWrite"}), "probe.mode ReadWrite cannot be used with objectLock.defaultRetention"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(testCtx(t), storageBucket(ns, fmt.Sprintf("invalid-%d", i), tc.spec))
			assertRejected(t, err, tc.want)
		})
	}
	t.Run("name too long for its Secrets", func(t *testing.T) {
		err := k8s.Create(testCtx(t), storageBucket(ns, strings.Repeat("n", 241), validBucketSpec()))
		assertRejected(t, err, "a StorageBucket's name may have at most 240 characters")
	})
}

// TestStorageBucketImmutableFields checks the transition rules: a bucket cannot move
// to another store or name once created, because that would orphan the first bucket.
func TestStorageBucketImmutableFields(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name   string
		create spec
		update func(spec)
		want   string
	}{
		{"change bucketName", with(validBucketSpec(), "bucketName", "first-bucket"), func(s spec) { s["bucketName"] = "second-bucket" }, "bucketName cannot be added, changed or removed after creation"},
		{"add bucketName", validBucketSpec(), func(s spec) { s["bucketName"] = "late-bucket" }, "bucketName cannot be added, changed or removed after creation"},
		{"remove bucketName", with(validBucketSpec(), "bucketName", "kept-bucket"), func(s spec) { delete(s, "bucketName") }, "bucketName cannot be added, changed or removed after creation"},
		{"change objectStoreRef without spec.move", validBucketSpec(), func(s spec) { s["objectStoreRef"] = map[string]any{"name": "other"} }, "objectStoreRef can change only with spec.move set"},
		{"move with an unknown versions mode", validBucketSpec(), func(s spec) {
			s["objectStoreRef"], s["move"] = map[string]any{"name": "other"}, map[string]any{"versions": "Some"}
		}, `spec.move.versions: Unsupported value: "Some"`},
		{"remove objectLock", with(validBucketSpec(), "objectLock", map[string]any{}), func(s spec) { delete(s, "objectLock") }, "objectLock cannot be removed"},
		{"remove a Compliance retention", with(validBucketSpec(), "objectLock", lock("Compliance", "days", 30)), func(s spec) { s["objectLock"] = map[string]any{} }, "a Compliance default retention cannot be removed, shortened or turned into Governance"},
		{"shorten a Compliance retention", with(validBucketSpec(), "objectLock", lock("Compliance", "days", 30)), func(s spec) { s["objectLock"] = lock("Compliance", "days", 29) }, "a Compliance default retention cannot be removed"},
		{"shorten a Compliance retention in years", with(validBucketSpec(), "objectLock", lock("Compliance", "years", 2)), func(s spec) { s["objectLock"] = lock("Compliance", "years", 1) }, "a Compliance default retention cannot be removed"},
		{"a Compliance year as 365 days", with(validBucketSpec(), "objectLock", lock("Compliance", "years", 1)), func(s spec) { s["objectLock"] = lock("Compliance", "days", 365) }, "a Compliance default retention cannot be removed"},
		{"turn Compliance into Governance", with(validBucketSpec(), "objectLock", lock("Compliance", "days", 30)), func(s spec) { s["objectLock"] = lock("Governance", "days", 3650) }, "a Compliance default retention cannot be removed"},
		{"suspend versioning of a locked bucket", with(validBucketSpec(), "objectLock", map[string]any{}), func(s spec) { s["versioning"] = "Suspended" }, "objectLock needs versioning Enabled"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			obj := storageBucket(ns, fmt.Sprintf("immutable-%d", i), tc.create)
			if err := k8s.Create(ctx, obj); err != nil {
				t.Fatalf("creating the valid object: %v", err)
			}
			s, _, _ := unstructured.NestedMap(obj.Object, "spec")
			tc.update(s)
			if err := unstructured.SetNestedMap(obj.Object, s, "spec"); err != nil {
				t.Fatal(err)
			}
			assertRejected(t, k8s.Update(ctx, obj), tc.want)
		})
	}
	t.Run("mutable fields stay mutable", func(t *testing.T) {
		ctx := testCtx(t)
		obj := storageBucket(ns, "mutable", with(validBucketSpec(), "bucketName", "mutable-bucket"))
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		s, _, _ := unstructured.NestedMap(obj.Object, "spec")
		s["versioning"] = "Enabled"
		s["tags"] = map[string]any{"team": "a"}
		s["deletionPolicy"] = "Delete"
		s["objectStoreRef"], s["move"] = map[string]any{"name": "elsewhere"}, map[string]any{"versions": "All"}
		_ = unstructured.SetNestedMap(obj.Object, s, "spec")
		if err := k8s.Update(ctx, obj); err != nil {
			t.Fatalf("updating mutable fields: %v", err)
		}
	})
	t.Run("object lock may be added and strengthened", func(t *testing.T) {
		ctx := testCtx(t)
		obj := storageBucket(ns, "lockable", validBucketSpec())
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		for _, l := range []map[string]any{
			{},                              // turned on for an existing bucket
			lock("Governance", "days", 30),  // a default retention added
			lock("Governance", "days", 1),   // a Governance one shortened
			lock("Compliance", "days", 365), // made Compliance
			lock("Compliance", "years", 1),  // the same, in years
			lock("Compliance", "days", 366), // a year as at most 366 days
			lock("Compliance", "years", 2),  // lengthened
		} {
			s, _, _ := unstructured.NestedMap(obj.Object, "spec")
			s["objectLock"] = l
			_ = unstructured.SetNestedMap(obj.Object, s, "spec")
			if err := k8s.Update(ctx, obj); err != nil {
				t.Fatalf("setting objectLock %v: %v", l, err)
			}
		}
	})
}

// lock is a spec.objectLock with a default retention of mode and the given period
// fields ("days", 30); with no fields, a retention without a period.
func lock(mode string, period ...any) map[string]any {
	r := map[string]any{"mode": mode}
	for i := 0; i+1 < len(period); i += 2 {
		r[period[i].(string)] = int64(period[i+1].(int)) // JSON numbers, as unstructured holds them
	}
	return map[string]any{"defaultRetention": r}
}

func TestObjectStoreAdmissionRejectsInvalidSpecs(t *testing.T) {
	secretRef := map[string]any{"namespace": "ops", "name": "creds"}
	cases := []struct {
		name string
		spec spec
		want string
	}{
		{"endpoint with ftp scheme", spec{"endpoint": "ftp://store.example.com"}, "endpoint must be an http:// or https:// URL with a host"},
		{"endpoint that is no URL", spec{"endpoint": "store example"}, "endpoint must be an http:// or https:// URL with a host"},
		{"endpoint without host", spec{"endpoint": "http://"}, "endpoint must be an http:// or https:// URL with a host"},
		{"caBundle with insecureSkipTLSVerify", spec{"endpoint": "https://s3.example.com", "caBundle": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "insecureSkipTLSVerify": true}, "caBundle and insecureSkipTLSVerify cannot both be set"},
		{"caBundle that is not PEM", spec{"caBundle": "not a certificate"}, "caBundle must be PEM"},
		{"health check interval below 5s", spec{"healthCheck": map[string]any{"interval": "1s"}}, "healthCheck.interval must be between 5s and 1h"},
		{"zero request budget", spec{"requestsPerSecond": 0}, "requestsPerSecond in body should be greater than or equal to 1"},
		{"bucket name prefix with underscore", spec{"bucketNamePrefix": "Dev_"}, "bucketNamePrefix may contain only lowercase letters, digits and '-'"},
		{"credentials ref without name", spec{"credentialsSecretRef": map[string]any{"namespace": "ops"}}, "spec.credentialsSecretRef.name: Required value"},
		{"credentials ref without namespace", spec{"applicationCredentialsSecretRef": map[string]any{"name": "creds"}}, "spec.applicationCredentialsSecretRef.namespace: Required value"},
		{"deletion policies without Retain", spec{"guardrails": map[string]any{"allowedDeletionPolicies": []any{"Delete"}}}, "guardrails.allowedDeletionPolicies must include Retain"},
		{"unknown deletion policy in guardrails", spec{"guardrails": map[string]any{"allowedDeletionPolicies": []any{"Retain", "Shred"}}}, `supported values: "Retain", "Delete", "Purge"`},
		{"bad adoption selector", spec{"guardrails": map[string]any{"adoptionAllowedNamespaces": map[string]any{"matchExpressions": []any{map[string]any{"key": "team", "operator": "Maybe"}}}}}, "guardrails.adoptionAllowedNamespaces.matchExpressions[].operator must be one of"},
		{"no object lock mode allowed", spec{"guardrails": map[string]any{"objectLock": map[string]any{"allowedModes": []any{}}}}, "allowedModes: Invalid value: 0: spec.guardrails.objectLock.allowedModes in body should have at least 1 items"},
		{"unknown object lock mode allowed", spec{"guardrails": map[string]any{"objectLock": map[string]any{"allowedModes": []any{"Legal"}}}}, `supported values: "Governance", "Compliance"`},
		{"object lock retention of 0 days", spec{"guardrails": map[string]any{"objectLock": map[string]any{"maxRetentionDays": 0}}}, "maxRetentionDays in body should be greater than or equal to 1"},
		{"release bound that is no duration", spec{"guardrails": map[string]any{"objectLock": map[string]any{"releaseBlockedDeletionAfter": "a day"}}}, "releaseBlockedDeletionAfter must be a duration such as 0s, 24h or 720h"},
		{"policy principal account of anonymous", spec{"guardrails": map[string]any{"policyPrincipalAccounts": []any{"123456789012", "Anonymous"}}}, "guardrails.policyPrincipalAccounts cannot list anonymous"},
		{"policy principal account with a wildcard", spec{"guardrails": map[string]any{"policyPrincipalAccounts": []any{"*"}}}, "spec.guardrails.policyPrincipalAccounts[0]: Invalid value"},
		{"policy principal account with a colon", spec{"guardrails": map[string]any{"policyPrincipalAccounts": []any{"arn:aws:iam::1:root"}}}, "spec.guardrails.policyPrincipalAccounts[0]: Invalid value"},
		{"empty policy principal account", spec{"guardrails": map[string]any{"policyPrincipalAccounts": []any{""}}}, "spec.guardrails.policyPrincipalAccounts[0]: Invalid value"},
		{"mover parallelism of 0", spec{"guardrails": map[string]any{"moves": map[string]any{"maxParallelism": 0}}}, "maxParallelism in body should be greater than or equal to 1"},
		{"unknown move permission", spec{"guardrails": map[string]any{"moves": map[string]any{"into": "Sometimes"}}}, `supported values: "Allowed", "Forbidden"`},
		{"retire into nothing", spec{"retire": map[string]any{"into": ""}}, "spec.retire.into in body should be at least 1 chars long"},
		{"retire with an unknown versions mode", spec{"retire": map[string]any{"into": "ceph", "versions": "Some"}}, `spec.retire.versions: Unsupported value: "Some"`},
		{"valid ref but bad selector", spec{"credentialsSecretRef": secretRef, "allowedNamespaces": map[string]any{"matchExpressions": []any{map[string]any{"key": "team", "operator": "Sometimes"}}}}, "operator must be one of In, NotIn, Exists, DoesNotExist"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(testCtx(t), objectStore(fmt.Sprintf("invalid-%d", i), tc.spec))
			assertRejected(t, err, tc.want)
		})
	}
}

// TestObjectStoreCannotRetireIntoItself: spec.retire.into names another store, on
// create and on update; retiring into another is accepted.
func TestObjectStoreCannotRetireIntoItself(t *testing.T) {
	ctx := testCtx(t)
	err := k8s.Create(ctx, objectStore("retires-into-itself", spec{"retire": map[string]any{"into": "retires-into-itself"}}))
	assertRejected(t, err, "spec.retire.into names this store itself")
	obj := objectStore("retires-elsewhere", spec{"retire": map[string]any{"into": "ceph", "paused": true}})
	if err := k8s.Create(ctx, obj); err != nil {
		t.Fatalf("retiring into another store: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	_ = unstructured.SetNestedField(obj.Object, "retires-elsewhere", "spec", "retire", "into")
	assertRejected(t, k8s.Update(ctx, obj), "spec.retire.into names this store itself")
}

// TestObjectStoreRefMayNameWhereTheBucketLives: without spec.move, objectStoreRef may
// change to the store the bucket lives on (status.objectStore, the operator's: where a
// retirement took it), and to no other; a tenant's write of that change leaves the
// status as it was.
func TestObjectStoreRefMayNameWhereTheBucketLives(t *testing.T) {
	ctx := testCtx(t)
	ns := newNamespace(t)
	obj := storageBucket(ns, "retired", with(validBucketSpec(), "objectStoreRef", map[string]any{"name": "minio"}))
	if err := k8s.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	update := func(store string) error {
		_ = unstructured.SetNestedField(obj.Object, store, "spec", "objectStoreRef", "name")
		return k8s.Update(ctx, obj)
	}
	assertRejected(t, update("ceph"), "objectStoreRef can change only with spec.move set")
	_ = unstructured.SetNestedField(obj.Object, "minio", "spec", "objectStoreRef", "name")
	_ = unstructured.SetNestedField(obj.Object, "ceph", "status", "objectStore")
	if err := k8s.Status().Update(ctx, obj); err != nil {
		t.Fatalf("the operator recording where the bucket lives: %v", err)
	}
	assertRejected(t, update("third"), "objectStoreRef can change only with spec.move set")
	_ = unstructured.SetNestedField(obj.Object, "ceph", "spec", "objectStoreRef", "name")
	if err := k8s.Update(ctx, obj); err != nil {
		t.Fatalf("naming the store the bucket lives on: %v", err)
	}
	if home, _, _ := unstructured.NestedString(obj.Object, "status", "objectStore"); home != "ceph" {
		t.Errorf("status.objectStore after the tenant's update: %q, want ceph", home)
	}
}

func assertRejected(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the API server accepted the object; want a rejection saying %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("rejected with\n  %v\nwant a message containing\n  %q", err, want)
	}
}

var _ client.Object = &unstructured.Unstructured{}
