package integration_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

func TestNamespaceNotAllowed(t *testing.T) {
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) {
		s.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"buckets": "allowed"}}
	})
	before := requests.snapshot(f.store)
	sb := f.bucket("outsider")
	got := f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonNamespaceNotAllowed)
	if got.Status.BucketName != "" {
		t.Errorf("a bucket was recorded for a refused namespace: %q", got.Status.BucketName)
	}
	if _, mutating, ops := since(before, requests.snapshot(f.store)); mutating > 0 {
		t.Fatalf("S3 was changed for a namespace that may not use the store: %v", ops)
	}

	// Labelling the namespace lets it in, without touching the StorageBucket.
	ns := &corev1.Namespace{}
	must(t, k8s.Get(f.ctx, types.NamespacedName{Name: f.ns}, ns))
	ns.Labels["buckets"] = "allowed"
	must(t, k8s.Update(f.ctx, ns))
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
}

// TestPacedCredentialsProblemsAndRecovery: a store whose Secret is missing, then wrong, then
// right; its buckets follow the store's verdict and converge once it is fixed.
func TestPacedCredentialsProblemsAndRecovery(t *testing.T) {
	t.Parallel() // mostly waiting on intervals: see the package doc in suite_test.go
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) {
		s.Spec.CredentialsSecretRef = &bkv1.SecretReference{Namespace: s.Spec.CredentialsSecretRef.Namespace, Name: "late-credentials"}
	})
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}}
	waitStore := func(reason string) {
		t.Helper()
		f.eventually(60*time.Second, "store reason "+reason, func() error {
			must(t, k8s.Get(f.ctx, objKey(store), store))
			if c := findStoreCond(store, bkv1.ConditionReady); c == nil || c.Reason != reason {
				return errf("store conditions %v", store.Status.Conditions)
			}
			return nil
		})
	}
	waitStore(bkv1.ReasonCredentialsMissing)
	sb := f.bucket("patient")
	f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonCredentialsMissing)

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "late-credentials"},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: seaweed.AccessKeyID, bkv1.CredentialsKeySecretAccessKey: "wrong-secret-value"},
	}
	must(t, k8s.Create(f.ctx, secret))
	waitStore(bkv1.ReasonCredentialsInvalid)
	f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonCredentialsInvalid)

	must(t, k8s.Get(f.ctx, objKey(secret), secret))
	secret.Data[bkv1.CredentialsKeySecretAccessKey] = []byte(seaweed.SecretAccessKey)
	must(t, k8s.Update(f.ctx, secret))
	waitStore(bkv1.ReasonReady)
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)

	if log := logs.String(); containsAny(log, "wrong-secret-value", seaweed.SecretAccessKey) {
		t.Fatal("a credential value appears in the manager log")
	}
	f.waitEvent(store, bkv1.ReasonCredentialsInvalid)
}

// TestApplicationCredentialsReachConnectionSecret: keys meant for applications are
// copied; the operator's own never are.
func TestApplicationCredentialsReachConnectionSecret(t *testing.T) {
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) {
		s.Spec.ApplicationCredentialsSecretRef = &bkv1.SecretReference{Namespace: s.Spec.CredentialsSecretRef.Namespace, Name: "app-credentials"}
	})
	must(t, k8s.Create(f.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app-credentials"},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: "app-id", bkv1.CredentialsKeySecretAccessKey: "app-secret"},
	}))
	sb := f.bucket("app", func(sb *bkv1.StorageBucket) { sb.Spec.ConnectionSecret.Name = "app-s3" })
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	secret := &corev1.Secret{}
	must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "app-s3"}, secret))
	if string(secret.Data[bkv1.SecretKeyAWSAccessKeyID]) != "app-id" || string(secret.Data[bkv1.SecretKeyAWSSecretKey]) != "app-secret" {
		t.Fatalf("application credentials not in the connection Secret: %v", keysOf(secret.Data))
	}

	// A Secret of the wanted name that is not ours is never overwritten.
	must(t, k8s.Create(f.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "taken"}, StringData: map[string]string{"mine": "yes"}}))
	other := f.bucket("clash", func(sb *bkv1.StorageBucket) { sb.Spec.ConnectionSecret.Name = "taken" })
	f.waitCondition(other, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonConnectionSecretConflict)
	taken := &corev1.Secret{}
	must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "taken"}, taken))
	if len(taken.Data) != 1 || string(taken.Data["mine"]) != "yes" {
		t.Fatalf("a foreign Secret was overwritten: %v", keysOf(taken.Data))
	}
}

// TestVersityReportsUnsupportedSettings: Versity has no lifecycle; the StorageBucket says
// so by name while tags and versioning are still applied and the Secret written.
func TestVersityReportsUnsupportedSettings(t *testing.T) {
	f := newFixture(t, versity)
	sb := f.bucket("partial", func(sb *bkv1.StorageBucket) {
		sb.Spec.Versioning = bkv1.VersioningEnabled
		sb.Spec.Tags = map[string]string{"team": "v"}
		sb.Spec.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{{ID: "x", ExpirationDays: ptr32(1)}}}
	})
	got := f.waitCondition(sb, bkv1.ConditionConfigured, metav1.ConditionFalse, bkv1.ReasonNotSupportedByStore)
	if c := findCond(got, bkv1.ConditionConfigured); !containsAny(c.Message, "lifecycle") {
		t.Errorf("Configured message does not name the setting: %q", c.Message)
	}
	if c := findCond(got, bkv1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("not Stalled: %s", describe(got.Status.Conditions))
	}
	bucket := got.Status.BucketName
	if tags, err := f.admin.GetBucketTagging(f.ctx, bucket); err != nil || tags["team"] != "v" || tags[bkv1.TagUID] != f.uidTagOf(got) {
		t.Errorf("tags on Versity: %v, %v", tags, err)
	}
	if v, err := f.admin.GetBucketVersioning(f.ctx, bucket); err != nil || v != "Enabled" {
		t.Errorf("versioning on Versity: %q, %v", v, err)
	}
	secret := &corev1.Secret{}
	must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "partial-bucket"}, secret))

	// Without the unsupported setting, the same bucket becomes Ready on Versity.
	f.updateSpec(sb, func(s *bkv1.StorageBucketSpec) { s.Lifecycle = nil })
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
}
