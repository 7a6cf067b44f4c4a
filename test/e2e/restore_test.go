package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestRestoreIntoARebuiltCluster follows docs/backup-and-recovery.md. Cluster A (a
// control plane and the operator at a fixed --cluster-id) has claims with data and
// keys on SeaweedFS, reached through a proxy that counts what changes a bucket. Its
// objects are exported as a backup tool would (YAML without status, uid,
// resourceVersion: what the page says to keep), and A is gone. Cluster B, a new
// control plane with its own etcd and the operator at the same id, gets the backup:
// first as it was, and every claim is refused (OwnedByAnotherClaim: the namespaces'
// UIDs are new) with nothing sent that changes a bucket; then with the stores'
// allowRebindToRecreatedNamespace set, as the page says, and every claim binds its
// bucket again: no CreateBucket reaches the store, no bucket is added, every object is
// there and readable with the new keys, and A's keys stop working.
func TestRestoreIntoARebuiltCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	suffix := randomSuffix(t)
	clusterID, prefix := "restore-"+suffix, "rs-"+suffix
	proxy, err := testenv.StartCountingProxy(seaweed.Endpoint, seaweed.AccessKeyID)
	must(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	admin, err := s3.New(ctx, s3.Config{Endpoint: seaweed.Endpoint, Region: seaweed.Region, ForcePathStyle: true,
		AccessKeyID: seaweed.AccessKeyID, SecretAccessKey: seaweed.SecretAccessKey})
	must(t, err)
	// Short collector passes, so that B's collector deletes A's users within the test.
	opts := operator.Options{ClusterID: clusterID, AccessCollectInterval: 2 * time.Second}

	// Cluster A.
	cpA, err := testenv.StartControlPlane()
	must(t, err)
	t.Cleanup(func() { stop("cluster A's control plane", cpA.Stop) })
	a := clusterWalk(t, ctx, cpA.Config)
	stopA := runManager(t, cpA.Config, opts)
	original := restoreFixture(prefix, proxy.Endpoint)
	a.apply(original)
	a.waitCurrent(original, 3*time.Minute)
	buckets := map[string]string{}
	for _, name := range []string{"photos", "reports"} {
		buckets[name] = a.storageBucket("team-a", name).Status.BucketName
	}
	data := map[string][]byte{
		buckets["photos"] + "/2026/beach.jpg": []byte("a photo, written with the claim's own key"),
		buckets["reports"] + "/q3.csv":        []byte("a report, written with the application's key"),
	}
	photosKeyA := a.keyClient(a.secret("team-a", "photos-access"))
	must(t, photosKeyA.PutObject(ctx, buckets["photos"], "2026/beach.jpg", data[buckets["photos"]+"/2026/beach.jpg"]))
	must(t, a.keyClient(a.secret("team-a", "reports-app-s3")).PutObject(ctx, buckets["reports"], "q3.csv", data[buckets["reports"]+"/q3.csv"]))
	before := ourBuckets(t, ctx, admin, prefix)

	// The backup, then cluster A is gone.
	backup := exportBackup(t, ctx, a.c)
	stopA()
	stop("cluster A's control plane", cpA.Stop)

	// Cluster B: a new etcd, the same cluster id.
	cpB, err := testenv.StartControlPlane()
	must(t, err)
	t.Cleanup(func() { stop("cluster B's control plane", cpB.Stop) })
	b := clusterWalk(t, ctx, cpB.Config)
	requests := &testenv.RequestLog{}
	optsB := opts
	optsB.S3Observer = requests.Observe
	stopB := runManager(t, cpB.Config, optsB)
	t.Cleanup(func() { b.cleanup(); stopB() })
	b.store("main", seaweed)
	writesBefore, createsBefore := proxy.BucketWrites(), proxy.BucketCreates()

	// The backup as it was: the claims are refused, and nothing changes on their buckets.
	restored := decodeObjects(t, "the backup", string(backup))
	b.apply(restored)
	for _, name := range []string{"photos", "reports"} {
		must(t, pollFor(b, 2*time.Minute, func() error {
			sb := b.storageBucket("team-a", name)
			if c := findCondition(sb, bkv1.ConditionStalled); c == nil || c.Reason != bkv1.ReasonOwnedByAnotherClaim {
				return errorf("%s: %s", name, testenv.DescribeConditions(sb.Status.Conditions))
			}
			return nil
		}))
	}
	if n := proxy.BucketWrites() - writesBefore; n != 0 {
		t.Errorf("%d requests changing a bucket reached the store while the restored claims were refused", n)
	}

	// The page's restore: the stores' guardrail set, then every claim and access Ready.
	for _, o := range restored {
		if o.GetKind() == "ObjectStore" {
			withRebind := o.DeepCopy()
			must(t, unstructured.SetNestedField(withRebind.Object, true, "spec", "guardrails", "allowRebindToRecreatedNamespace"))
			b.apply([]*unstructured.Unstructured{withRebind})
		}
	}
	b.waitCurrent(restored, 3*time.Minute)
	if n := proxy.BucketCreates() - createsBefore; n != 0 {
		t.Errorf("%d CreateBucket requests reached the store during the restore", n)
	}
	if n := requests.Snapshot("main")["CreateBucket"]; n != 0 {
		t.Errorf("the restored operator sent %d CreateBucket", n)
	}
	for name, bucket := range buckets {
		sb := b.storageBucket("team-a", name)
		if sb.Status.BucketName != bucket {
			t.Errorf("restored %s holds bucket %q, want %q", name, sb.Status.BucketName, bucket)
		}
		if c := findCondition(sb, bkv1.ConditionProvisioned); c == nil || c.Reason != bkv1.ReasonBucketBound {
			t.Errorf("restored %s: %s, want Provisioned by %s", name, testenv.DescribeConditions(sb.Status.Conditions), bkv1.ReasonBucketBound)
		}
	}
	if after := ourBuckets(t, ctx, admin, prefix); !slices.Equal(after, before) {
		t.Errorf("buckets on the store after the restore %v, before %v", after, before)
	}
	// Every object is there, read with the keys of cluster B: the claim's own key reads
	// its bucket, the application's key both.
	readers := map[string][]s3.Client{
		buckets["photos"]:  {b.keyClient(b.secret("team-a", "photos-access")), b.keyClient(b.secret("team-a", "reports-app-s3"))},
		buckets["reports"]: {b.keyClient(b.secret("team-a", "reports-app-s3"))},
	}
	for path, want := range data {
		bucket, key, _ := strings.Cut(path, "/")
		for _, k := range readers[bucket] {
			got, err := k.GetObject(ctx, bucket, key, 1024)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s read with a restored key: %q, %v; want %q", path, got, err, want)
			}
		}
	}
	// Cluster A's keys go: B's collector deletes the users of this cluster id that no
	// access of B grants.
	must(t, pollFor(b, 2*time.Minute, func() error {
		if _, err := photosKeyA.GetObject(ctx, buckets["photos"], "2026/beach.jpg", 1024); err == nil {
			return errorf("cluster A's key still reads")
		}
		return nil
	}))

	// The guardrail back as it was: the claims stay Ready.
	b.apply(objectsOfKind(restored, "ObjectStore"))
	b.waitCurrent(objectsOfKind(restored, "ObjectStore"), time.Minute)
	b.waitCurrent(objectsOfKind(restored, "StorageBucket"), time.Minute)
}

// restoreFixture is cluster A's state: the store's credentials and the store, a team's
// namespace, a claim with a key of its own (Retain), a versioned claim purged on
// deletion, and an application's access to both.
func restoreFixture(prefix, endpoint string) []*unstructured.Unstructured {
	return toUnstructured(
		&corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "bucketkeeper-system", Name: "main-store-credentials"}, Type: corev1.SecretTypeOpaque,
			StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: seaweed.AccessKeyID, bkv1.CredentialsKeySecretAccessKey: seaweed.SecretAccessKey}},
		&bkv1.ObjectStore{TypeMeta: metav1.TypeMeta{APIVersion: bkv1.GroupVersion.String(), Kind: "ObjectStore"},
			ObjectMeta: metav1.ObjectMeta{Name: "main"},
			Spec: bkv1.ObjectStoreSpec{
				Endpoint: endpoint, Region: seaweed.Region, ForcePathStyle: true, BucketNamePrefix: prefix,
				CredentialsSecretRef: &bkv1.SecretReference{Namespace: "bucketkeeper-system", Name: "main-store-credentials"},
				AllowedNamespaces:    &metav1.LabelSelector{MatchLabels: map[string]string{"bucketkeeper.io/tenant": "true"}},
				AccessProvider:       &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM},
				HealthCheck:          bkv1.StoreHealthCheck{Interval: &metav1.Duration{Duration: 5 * time.Second}},
			}},
		&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"bucketkeeper.io/tenant": "true"}}},
		&bkv1.StorageBucket{TypeMeta: metav1.TypeMeta{APIVersion: bkv1.GroupVersion.String(), Kind: "StorageBucket"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "photos"},
			Spec:       bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: "main"}, Access: string(bkv1.AccessReadWrite)}},
		&bkv1.StorageBucket{TypeMeta: metav1.TypeMeta{APIVersion: bkv1.GroupVersion.String(), Kind: "StorageBucket"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "reports"},
			Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: "main"},
				Versioning: bkv1.VersioningEnabled, DeletionPolicy: bkv1.DeletionPolicyPurge}},
		&bkv1.BucketAccess{TypeMeta: metav1.TypeMeta{APIVersion: bkv1.GroupVersion.String(), Kind: "BucketAccess"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "reports-app"},
			Spec: bkv1.BucketAccessSpec{SecretName: "reports-app-s3", Buckets: []bkv1.BucketGrant{
				{Name: "reports", Mode: bkv1.AccessReadWrite}, {Name: "photos", Mode: bkv1.AccessReadOnly}}}},
	)
}

// toUnstructured converts typed objects for the walk's server-side apply.
func toUnstructured(objs ...client.Object) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			panic(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			panic(err)
		}
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		out = append(out, u)
	}
	return out
}

// backupKinds are what docs/backup-and-recovery.md says to keep, in the order a
// restore applies them.
var backupKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "NamespaceList"},
	{Version: "v1", Kind: "SecretList"},
	bkv1.GroupVersion.WithKind("ObjectStoreList"),
	bkv1.GroupVersion.WithKind("StorageBucketList"),
	bkv1.GroupVersion.WithKind("BucketAccessList"),
}

// exportBackup exports cluster A's state as the page's recipe does: the objects
// without what the API server gives them, the claims' namespaces, the Opaque Secrets
// of the operator's namespace that the operator did not write, the accesses that no
// claim owns.
func exportBackup(t *testing.T, ctx context.Context, c client.Client) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, gvk := range backupKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		var opts []client.ListOption
		if gvk.Kind == "SecretList" {
			opts = append(opts, client.InNamespace("bucketkeeper-system"))
		}
		must(t, c.List(ctx, list, opts...))
		for _, item := range list.Items {
			switch {
			case gvk.Kind == "NamespaceList" && item.GetName() != "team-a":
				continue
			case gvk.Kind == "SecretList" && (item.GetLabels()[bkv1.LabelManagedBy] == bkv1.LabelManagedByValue || item.Object["type"] != string(corev1.SecretTypeOpaque)):
				continue
			case len(item.GetOwnerReferences()) > 0:
				continue // made again by its owner
			}
			unstructured.RemoveNestedField(item.Object, "status")
			for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"} {
				unstructured.RemoveNestedField(item.Object, "metadata", f)
			}
			data, err := yaml.Marshal(item.Object)
			must(t, err)
			fmt.Fprintf(&out, "---\n%s", data)
		}
	}
	return out.Bytes()
}

// clusterWalk is a walk on a control plane whose operator the test runs itself.
func clusterWalk(t *testing.T, ctx context.Context, cfg *rest.Config) *walk {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: operator.Scheme()})
	must(t, err)
	must(t, ignoreExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bucketkeeper-system"}})))
	return &walk{t: t, ctx: ctx, cfg: cfg, c: c, stores: map[string]s3.Client{}}
}

// runManager runs an operator on cfg until the returned stop is called (at the latest
// when the test ends).
func runManager(t *testing.T, cfg *rest.Config, opts operator.Options) (stop func()) {
	t.Helper()
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	mgr, err := operator.New(cfg, opts)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(logs, "manager stopped with an error:", err)
		}
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("manager did not stop within 30s")
		}
	}
	t.Cleanup(stop)
	return stop
}

// ourBuckets lists the store's buckets of the test's prefix, sorted.
func ourBuckets(t *testing.T, ctx context.Context, admin s3.Client, prefix string) []string {
	t.Helper()
	all, err := admin.ListBuckets(ctx)
	must(t, err)
	var out []string
	for _, b := range all {
		if strings.HasPrefix(b, prefix+"-") {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

func objectsOfKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}
