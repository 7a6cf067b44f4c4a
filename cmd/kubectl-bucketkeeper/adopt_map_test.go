package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// update rewrites the golden files of the output format tests (go test -run Golden -update).
var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or writes it there with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		must(t, os.MkdirAll("testdata", 0o755))
		must(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	must(t, err)
	if got != string(want) {
		t.Errorf("%s differs (go test -run %s -update rewrites it); got:\n%s", path, t.Name(), got)
	}
}

func TestNamespaceMap(t *testing.T) {
	rules, err := parseNamespaceRules(" team-a-=team-a, logs-*=observability ,*-tmp=scratch", "--namespace-map", false)
	must(t, err)
	more, err := parseNamespaceRules("# billing's\n\nbill[0-9]*=billing\n", "map.txt", true)
	must(t, err)
	m := &namespaceMap{rules: append(rules, more...)}
	for bucket, want := range map[string]string{
		"team-a-photos":   "team-a",
		"team-a-logs-tmp": "team-a", // the first rule that matches
		"logs-2026":       "observability",
		"x-tmp":           "scratch",
		"bill7-invoices":  "billing",
		"billing":         "",
		"team-b-photos":   "",
	} {
		if got, _ := m.namespaceFor(bucket); got != want {
			t.Errorf("%s: namespace %q, want %q", bucket, got, want)
		}
	}
	m.defaultNS = "platform"
	if got, rule := m.namespaceFor("team-b-photos"); got != "platform" || rule != "--default-namespace" {
		t.Errorf("with a default: %q by %q", got, rule)
	}

	for _, bad := range []string{"team-a", "=team-a", "team-a-=", "x=Team_A", "[=ns"} {
		if _, err := parseNamespaceRules(bad, "--namespace-map", false); err == nil {
			t.Errorf("%q: parsed", bad)
		}
	}
	if _, err := parseNamespaceRules("ok=ns\nbroken\n", "map.txt", true); err == nil || !strings.Contains(err.Error(), "map.txt:2") {
		t.Errorf("a bad line: %v, want it named map.txt:2", err)
	}
}

func TestValidBucketName(t *testing.T) {
	for name, ok := range map[string]bool{
		"photos": true, "logs.2026-01": true, "ab": false, "Photos": false, "a_b": false,
		"192.168.1.1": false, "xn--abc": false, "abc-s3alias": false, "a..b": false, "a.-b": false,
	} {
		if got := validBucketName(name) == ""; got != ok {
			t.Errorf("%s: valid %v, want %v (%s)", name, got, ok, validBucketName(name))
		}
	}
}

// TestAdoptManifestGolden holds the manifest's format: a comment saying where the
// bucket came from and what cannot be declared, then the StorageBucket with every
// setting, and no empty probe or connectionSecret.
func TestAdoptManifestGolden(t *testing.T) {
	store := &bkv1.ObjectStore{}
	store.Name = "legacy"
	b := &bucketRead{name: "team-a-photos", namespace: "team-a", rule: "team-a-=team-a"}
	b.spec = bkv1.StorageBucketSpec{
		ObjectStoreRef: bkv1.ObjectStoreReference{Name: "legacy"},
		BucketName:     "team-a-photos",
		Adoption:       bkv1.AdoptionIfUnowned,
		DeletionPolicy: bkv1.DeletionPolicyRetain,
		Versioning:     bkv1.VersioningEnabled,
		PublicAccess:   bkv1.PublicAccessBlocked,
		Tags:           map[string]string{"team": "a", "cost-center": "42"},
		Lifecycle: &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{
			{ID: "expire-tmp", Prefix: "tmp/", ExpirationDays: ptr.To[int32](7)},
		}},
		Policy: &apiextensionsv1.JSON{Raw: []byte(`{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-photos/private/*"}]}`)},
		CORS: []bkv1.CORSRule{{ID: "web", AllowedOrigins: []string{"https://a.example"}, AllowedMethods: []bkv1.CORSMethod{"GET", "HEAD"},
			MaxAgeSeconds: ptr.To[int32](300)}},
		ObjectLock: &bkv1.ObjectLock{DefaultRetention: &bkv1.ObjectLockRetention{Mode: bkv1.ObjectLockGovernance, Days: ptr.To[int32](30)}},
		Quota:      &bkv1.BucketQuota{MaxSize: resource.NewQuantity(10<<30, resource.BinarySI)},
	}
	b.note(`lifecycle rule "archive" uses what spec.lifecycle cannot say: it stays on the bucket as it is, outside the spec`)
	m, err := manifest(store, b)
	must(t, err)
	golden(t, "adopt-manifest.golden", string(m))
}
