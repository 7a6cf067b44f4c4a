package v1alpha1_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/guardrail"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestSamplesAreAccepted applies every document under config/samples: what the docs
// tell people to copy must pass admission, and a sample's bucket policy the guardrails
// of a store that allows no public buckets.
func TestSamplesAreAccepted(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	applied := 0
	for _, file := range files {
		for _, obj := range readObjects(t, file) {
			if obj.GetKind() == "Kustomization" {
				continue
			}
			if ns := obj.GetNamespace(); ns != "" { // the samples' credentials Secrets live in the operator's
				err := k8s.Create(testCtx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatal(err)
				}
			}
			t.Run(filepath.Base(file)+"/"+obj.GetName(), func(t *testing.T) {
				if err := k8s.Create(testCtx(t), obj, client.DryRunAll); err != nil {
					t.Fatalf("sample rejected: %v", err)
				}
				assertPolicyPasses(t, obj)
			})
			applied++
		}
	}
	if applied < 3 {
		t.Fatalf("only %d sample objects found; want the ObjectStore and two StorageBuckets", applied)
	}
}

// assertPolicyPasses fails unless a StorageBucket's policy, if it has one, passes the
// guardrails of a store that allows no public buckets.
func assertPolicyPasses(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	policy, ok, _ := unstructured.NestedMap(obj.Object, "spec", "policy")
	if obj.GetKind() != "StorageBucket" || !ok {
		return
	}
	bucket, _, _ := unstructured.NestedString(obj.Object, "spec", "bucketName")
	doc, err := json.Marshal(policy)
	if err != nil {
		t.Fatal(err)
	}
	report, err := guardrail.InspectPolicy(doc, bucket, nil)
	if err != nil || report.Public != "" {
		t.Errorf("the guardrails refuse the sample's policy: %v (public: %s %s)", err, report.Public, report.PublicPrincipal)
	}
}

func readObjects(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("%s: %v", file, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// TestDefaultsAreApplied checks that an object with only the required field comes back
// with the documented defaults, which the controller then relies on.
func TestDefaultsAreApplied(t *testing.T) {
	ctx := testCtx(t)
	sb := &bkv1.StorageBucket{}
	sb.Namespace, sb.Name = newNamespace(t), "defaults"
	sb.Spec.ObjectStoreRef.Name = "local"
	if err := k8s.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	s := sb.Spec
	if s.DeletionPolicy != bkv1.DeletionPolicyRetain || s.Adoption != bkv1.AdoptionNever || s.PublicAccess != bkv1.PublicAccessBlocked {
		t.Errorf("policy defaults: deletionPolicy=%q adoption=%q publicAccess=%q", s.DeletionPolicy, s.Adoption, s.PublicAccess)
	}
	if s.Probe.Interval != nil || s.Probe.Timeout == nil || s.Probe.Timeout.Duration.String() != "5s" || s.Probe.Mode != bkv1.ProbeModeHead {
		t.Errorf("probe defaults: %+v", s.Probe)
	}
	if s.Versioning != "" {
		t.Errorf("versioning must stay unset (unmanaged) by default, got %q", s.Versioning)
	}

	store := &bkv1.ObjectStore{}
	store.Name = "defaults-" + sb.Namespace
	if err := k8s.Create(ctx, store); err != nil {
		t.Fatal(err)
	}
	if store.Spec.Region != "us-east-1" || store.Spec.RequestsPerSecond != 50 || store.Spec.Burst != 100 ||
		store.Spec.HealthCheck.Interval == nil || store.Spec.HealthCheck.Interval.Duration.String() != "30s" {
		t.Errorf("store defaults: %+v", store.Spec)
	}
	// The guardrails default to safe: no adoption, prefix enforced, nothing public.
	g := store.Spec.Guardrails
	if g.AdoptionAllowedNamespaces != nil || g.AllowAnyBucketName || g.AllowPublicBuckets ||
		!slices.Equal(g.AllowedDeletionPolicies, []bkv1.DeletionPolicy{bkv1.DeletionPolicyRetain, bkv1.DeletionPolicyDelete, bkv1.DeletionPolicyPurge}) {
		t.Errorf("guardrail defaults: %+v", g)
	}
	// Object lock: Governance only, no bypass by a Purge, a blocked deletion waits a day.
	if l := g.ObjectLock; !slices.Equal(l.AllowedModes, []bkv1.ObjectLockMode{bkv1.ObjectLockGovernance}) || l.MaxRetentionDays != nil ||
		l.PurgeMayBypassGovernance || l.ReleaseBlockedDeletionAfter == nil || l.ReleaseBlockedDeletionAfter.Duration != 24*time.Hour {
		t.Errorf("object lock guardrail defaults: %+v", l)
	}

	// S3's tag character set: letters of any script, digits, spaces and _ . : / = + - @.
	tagged := &bkv1.StorageBucket{}
	tagged.Namespace, tagged.Name = sb.Namespace, "s3-tag-charset"
	tagged.Spec.ObjectStoreRef.Name = "local"
	tagged.Spec.Tags = map[string]string{"cost center": "Zürich 42", "team_a.b:c/d=e+f-g@h": "ok"}
	if err := k8s.Create(ctx, tagged); err != nil {
		t.Errorf("tags within S3's character set were refused: %v", err)
	}
}

// TestStatusOnlyThroughSubresource: a spec write must not be able to forge status, and
// a status write must not change the spec or bump the generation.
func TestStatusOnlyThroughSubresource(t *testing.T) {
	ctx := testCtx(t)
	sb := &bkv1.StorageBucket{}
	sb.Namespace, sb.Name = newNamespace(t), "status"
	sb.Spec.ObjectStoreRef.Name = "local"
	if err := k8s.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	sb.Status.BucketName = "forged"
	if err := k8s.Update(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if sb.Status.BucketName != "" {
		t.Fatalf("a main-resource update wrote status: %q", sb.Status.BucketName)
	}

	generation := sb.Generation
	sb.Status.BucketName = "real"
	sb.Spec.Suspend = true
	if err := k8s.Status().Update(ctx, sb); err != nil {
		t.Fatal(err)
	}
	got := &bkv1.StorageBucket{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(sb), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.BucketName != "real" {
		t.Errorf("status update lost: %q", got.Status.BucketName)
	}
	if got.Spec.Suspend || got.Generation != generation {
		t.Errorf("a status update changed the spec (suspend=%v) or generation (%d -> %d)", got.Spec.Suspend, generation, got.Generation)
	}
}
