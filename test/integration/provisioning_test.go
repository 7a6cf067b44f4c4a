package integration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/controller/storagebucket"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestProvisionBucketAndConnectionSecret: a claim gets its bucket, tagged and
// configured, and a connection Secret without the store's own keys, on every store.
func TestProvisionBucketAndConnectionSecret(t *testing.T) {
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) {
			t.Parallel()
			provisionBucketAndConnectionSecret(t, server)
		})
	}
}

func provisionBucketAndConnectionSecret(t *testing.T, server *testenv.S3Server) {
	f := newFixture(t, server)
	sb := f.bucket("photos", func(sb *bkv1.StorageBucket) {
		sb.Spec.Versioning = bkv1.VersioningEnabled
		sb.Spec.Tags = map[string]string{"team": "media"}
	})
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)

	if got.Status.BucketName == "" || !strings.HasPrefix(got.Status.BucketName, f.ns+"-photos-") {
		t.Errorf("status.bucketName = %q, want the derived name", got.Status.BucketName)
	}
	if got.Status.Endpoint != server.Endpoint || got.Status.Region != server.Region || got.Status.ObservedGeneration != got.Generation {
		t.Errorf("status endpoint/region/observedGeneration = %q/%q/%d", got.Status.Endpoint, got.Status.Region, got.Status.ObservedGeneration)
	}
	for _, typ := range []string{bkv1.ConditionProvisioned, bkv1.ConditionConfigured} {
		if c := findCond(got, typ); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("%s not True: %s", typ, describe(got.Status.Conditions))
		}
	}
	if findCond(got, bkv1.ConditionStalled) != nil || findCond(got, bkv1.ConditionReconciling) != nil {
		t.Errorf("Stalled/Reconciling left behind: %s", describe(got.Status.Conditions))
	}

	bucket := got.Status.BucketName
	tags, err := f.admin.GetBucketTagging(f.ctx, bucket)
	must(t, err)
	if tags[bkv1.TagClaim] != f.ns+"/photos" || tags[bkv1.TagUID] != f.uidTagOf(got) || tags["team"] != "media" {
		t.Errorf("bucket tags = %v", tags)
	}
	if v, err := f.admin.GetBucketVersioning(f.ctx, bucket); err != nil || v != s3.VersioningEnabled {
		t.Errorf("versioning = %q, %v", v, err)
	}

	secret := &corev1.Secret{}
	must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "photos-bucket"}, secret))
	if !metav1.IsControlledBy(secret, got) {
		t.Errorf("connection Secret is not controlled by the StorageBucket: %v", secret.OwnerReferences)
	}
	if secret.Labels[bkv1.LabelManagedBy] != bkv1.LabelManagedByValue {
		t.Errorf("connection Secret labels = %v", secret.Labels)
	}
	wantKeys := map[string]string{
		bkv1.SecretKeyBucketName: bucket, bkv1.SecretKeyBucketRegion: server.Region, bkv1.SecretKeyAWSRegion: server.Region,
		bkv1.SecretKeyBucketEndpoint: server.Endpoint, bkv1.SecretKeyAWSEndpointS3: server.Endpoint, bkv1.SecretKeyBucketHost: "127.0.0.1",
	}
	for k, v := range wantKeys {
		if string(secret.Data[k]) != v {
			t.Errorf("connection Secret %s = %q, want %q", k, secret.Data[k], v)
		}
	}
	if len(secret.Data[bkv1.SecretKeyBucketPort]) == 0 {
		t.Error("connection Secret has no BUCKET_PORT")
	}
	for k, v := range secret.Data {
		if string(v) == server.SecretAccessKey || string(v) == server.AccessKeyID || strings.HasPrefix(k, "AWS_ACCESS") || strings.HasPrefix(k, "AWS_SECRET") {
			t.Errorf("connection Secret carries the store's admin credentials under %s", k)
		}
	}
	f.waitEvent(got, bkv1.ReasonBucketCreated)
	if strings.Contains(logs.String(), server.SecretAccessKey) {
		t.Error("the store's secret key appears in the manager log")
	}
}

// TestSecondReconcileChangesNothing runs a full resync of a Ready bucket (a fresh
// reconciler, so nothing is remembered, at the bucket's sync slot) and counts what it
// writes: no mutating S3 call, no status write.
func TestSecondReconcileChangesNothing(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := f.bucket("steady", func(sb *bkv1.StorageBucket) {
		sb.Spec.Versioning = bkv1.VersioningEnabled
		sb.Spec.Tags = map[string]string{"a": "b"}
		sb.Spec.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{{ID: "tmp", Prefix: "tmp/", ExpirationDays: ptr32(3)}}}
		sb.Spec.Policy = policyJSON(t, naming.BucketName("", f.ns, "steady"))
	})
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	// The first probe's verdict is the manager's last write of a new bucket.
	f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)

	statusWrites := 0
	counting, err := client.NewWithWatch(cfg, client.Options{Scheme: k8s.Scheme()})
	must(t, err)
	wrapped := interceptor.NewClient(counting.(client.WithWatch), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			statusWrites++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	var ops []string
	stores := &stores.Registry{Client: wrapped, APIReader: counting, Factory: s3.New,
		Observer: func(_ string, op string, _ int, _ error) { ops = append(ops, op) }}
	clk := clocktesting.NewFakeClock(time.Now())
	r := &storagebucket.Reconciler{Client: wrapped, Recorder: events.NewFakeRecorder(10), Stores: stores,
		Clock: clk, SyncInterval: time.Hour, ClusterID: clusterID}
	// Started afresh, it leaves the converged bucket until its slot in the interval
	// (TestRestartDoesNotResyncAtOnce); from then on it checks it in full.
	_, err = r.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sb)})
	must(t, err)
	clk.Step(time.Hour)
	res, err := r.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sb)})
	must(t, err)
	if res.RequeueAfter != time.Hour {
		t.Errorf("RequeueAfter = %s, want the sync interval", res.RequeueAfter)
	}
	mutating := 0
	for _, op := range ops {
		if s3.IsMutating(op) {
			mutating++
		}
	}
	if len(ops) == 0 {
		t.Fatal("the resync read nothing from the store; it cannot have checked for drift")
	}
	if mutating != 0 || statusWrites != 0 {
		t.Fatalf("a resync of a converged bucket made %d mutating S3 calls and %d status writes (ops: %v)", mutating, statusWrites, ops)
	}
}

// TestPacedDriftIsCorrected runs on the stores with lifecycle rules (Versity reports them
// NotSupportedByStore, TestVersityReportsUnsupportedSettings).
func TestPacedDriftIsCorrected(t *testing.T) {
	t.Parallel() // mostly waiting on intervals: see the package doc in suite_test.go
	for _, srv := range []*testenv.S3Server{seaweed, rgw} {
		t.Run(string(srv.Kind), func(t *testing.T) {
			t.Parallel()
			testDriftIsCorrected(t, srv)
		})
	}
}

func testDriftIsCorrected(t *testing.T, srv *testenv.S3Server) {
	f := newFixture(t, srv)
	sb := f.bucket("drifty", func(sb *bkv1.StorageBucket) {
		sb.Spec.Versioning = bkv1.VersioningEnabled
		sb.Spec.Tags = map[string]string{"team": "a"}
		sb.Spec.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{{ID: "tmp", Prefix: "tmp/", ExpirationDays: ptr32(3)}}}
		sb.Spec.Policy = policyJSON(t, naming.BucketName("", f.ns, "drifty"))
	})
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := got.Status.BucketName

	// Someone changes everything behind the operator's back.
	must(t, f.admin.PutBucketVersioning(f.ctx, bucket, s3.VersioningSuspended))
	must(t, f.admin.PutBucketTagging(f.ctx, bucket, map[string]string{"team": "b", bkv1.TagClaim: f.ns + "/drifty", bkv1.TagUID: f.uidTagOf(got)}))
	must(t, f.admin.DeleteBucketLifecycle(f.ctx, bucket))
	must(t, f.admin.DeleteBucketPolicy(f.ctx, bucket))

	f.eventually(4*syncInterval, "drift to be corrected", func() error {
		return checkBucket(f, bucket, s3.VersioningEnabled, "a", 1, true)
	})

	// Removing settings from the spec removes them from the bucket.
	f.updateSpec(sb, func(s *bkv1.StorageBucketSpec) {
		s.Tags = nil
		s.Lifecycle = nil
		s.Policy = nil
	})
	f.eventually(30*time.Second, "removed settings to disappear", func() error {
		return checkBucket(f, bucket, s3.VersioningEnabled, "", 0, false)
	})
}

func TestPacedStalledObjectSendsNoRequestStorm(t *testing.T) {
	t.Parallel() // mostly waiting on intervals: see the package doc in suite_test.go
	f := newFixture(t, seaweed)
	must(t, f.admin.CreateBucket(f.ctx, f.ns+"-foreign", ""))
	sb := f.bucket("stalled", func(sb *bkv1.StorageBucket) { sb.Spec.BucketName = f.ns + "-foreign" })
	f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonBucketNotOwned)

	// It is looked at again once per sync interval, as a foreign bucket may change hands:
	// wait for three such looks (its HeadBucket) instead of a fixed time. The store holds
	// this one claim, so its requests are this claim's and the store's health check.
	before := requests.snapshot(f.store)
	start := time.Now()
	f.eventually(10*syncInterval, "three resyncs of the stalled object", func() error {
		if _, _, ops := since(before, requests.snapshot(f.store)); ops["HeadBucket"] < 3 {
			return errf("ops %v", ops)
		}
		return nil
	})
	window := time.Since(start)
	_, mutating, ops := since(before, requests.snapshot(f.store))
	// Load only slows resyncs down; a hot loop would be thousands of requests. Each
	// resync reads the bucket and its tags once.
	resyncs := 1 + int(window/syncInterval)
	t.Logf("%s: %v", window.Round(100*time.Millisecond), ops)
	if mutating > 0 {
		t.Fatalf("a stalled object caused %d mutating S3 requests: %v", mutating, ops)
	}
	for op, n := range ops {
		if op != "ListBuckets" && n > resyncs {
			t.Errorf("a stalled object caused %d %s requests in %s; one resync per %s allows %d", n, op, window, syncInterval, resyncs)
		}
	}
	if n := ops["ListBuckets"]; n > s3.MaxAttempts*(1+int(window/defaults.MinStoreCheckGap)) {
		t.Errorf("%d health-check requests in %s", n, window)
	}
}

func checkBucket(f *fixture, bucket string, versioning s3.VersioningStatus, team string, rules int, policy bool) error {
	if v, err := f.admin.GetBucketVersioning(f.ctx, bucket); err != nil || v != versioning {
		return errf("versioning %q (%v)", v, err)
	}
	tags, err := f.admin.GetBucketTagging(f.ctx, bucket)
	if err != nil || tags["team"] != team {
		return errf("tags %v (%v)", tags, err)
	}
	lc, err := f.admin.GetBucketLifecycle(f.ctx, bucket)
	if err != nil || len(lc) != rules {
		return errf("lifecycle %v (%v)", lc, err)
	}
	p, err := f.admin.GetBucketPolicy(f.ctx, bucket)
	if err != nil || (p != "") != policy {
		return errf("policy %q (%v)", p, err)
	}
	return nil
}
