package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// moverNamespace holds the checkpoints of the suite's moves between stores.
const moverNamespace = "bucketkeeper-moves"

// The suite runs the plugin's verbs in-process, as kubectl would run the binary, with
// a kubeconfig file of a real control plane on which an operator, built as the binary
// builds it, runs in this test process against a real SeaweedFS. Each test makes its
// own namespace and ObjectStore. They start on the first fixture, so the unit tests of
// this package (go test -run TestParseTarget) start no server.
var (
	cfg        *rest.Config
	k8s        client.Client
	kubeconfig string
	seaweed    *testenv.S3Server
	logs       = &testenv.LogBuffer{}

	startOnce sync.Once
	startErr  error
	// stops undo what start did, last first.
	stops []func()
)

func TestMain(m *testing.M) {
	if args, ok := asKubectl(); ok {
		// The test binary standing in for `kubectl bucketkeeper` (see kubectlWrapper).
		os.Exit(run(context.Background(), args, genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
	}
	code := m.Run()
	for _, stop := range slices.Backward(stops) {
		stop()
	}
	os.Exit(code)
}

// started starts the control plane, SeaweedFS and the operator once, and fails the
// test if they could not start.
func started(t *testing.T) {
	t.Helper()
	startOnce.Do(func() { startErr = start() })
	if startErr != nil {
		t.Fatal(startErr)
	}
}

func start() error {
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true)))
	cp, err := testenv.StartControlPlane()
	if err != nil {
		return err
	}
	stops = append(stops, func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	})
	cfg = cp.Config
	servers, closeServers, err := testenv.StartS3Servers(testenv.SeaweedFS)
	if err != nil {
		return err
	}
	stops = append(stops, closeServers)
	seaweed = servers[0]
	dir, err := os.MkdirTemp("", "kubectl-bucketkeeper-test-")
	if err != nil {
		return err
	}
	stops = append(stops, func() { os.RemoveAll(dir) })
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, "envtest", "default", cfg); err != nil {
		return err
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: operator.Scheme()}); err != nil {
		return err
	}
	// Moves (a store's retirement) run in this process, their checkpoints in a
	// namespace of their own.
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: moverNamespace}}); err != nil {
		return err
	}
	mgr, err := operator.New(cfg, operator.Options{MetricsBindAddress: "0", HealthProbeBindAddress: "0", MoverNamespace: moverNamespace})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	stops = append(stops, func() { cancel(); <-done })
	return nil
}

// result is one run of the plugin.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// plugin runs `kubectl bucketkeeper ARGS` with the suite's kubeconfig, in namespace ns
// unless ns is "" (the kubeconfig context's namespace).
func plugin(t *testing.T, ns string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	full := []string{"--kubeconfig", kubeconfig}
	if ns != "" {
		full = append(full, "-n", ns)
	}
	code := run(ctx, append(full, args...), genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return result{stdout: out.String(), stderr: errOut.String(), code: code}
}

// fixture is one test's namespace, credentials Secret and ObjectStore on a SeaweedFS.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	ns    string
	store string
	srv   *testenv.S3Server
}

// newFixture makes the namespace and an ObjectStore on srv (the suite's SeaweedFS when
// nil) that issues keys through IAM. Cleanup abandons the test's buckets
// (deletion-policy Orphan: a store a test took down need not answer) and deletes its
// accesses, then the store.
func newFixture(t *testing.T, srv *testenv.S3Server, mutate ...func(*bkv1.ObjectStore)) *fixture {
	t.Helper()
	started(t)
	if srv == nil {
		srv = seaweed
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "plugin-"}}
	must(t, k8s.Create(ctx, ns))
	f := &fixture{t: t, ctx: ctx, ns: ns.Name, store: "store-" + ns.Name, srv: srv}
	must(t, k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "store-credentials"},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: srv.AccessKeyID, bkv1.CredentialsKeySecretAccessKey: srv.SecretAccessKey},
	}))
	store := &bkv1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: f.store},
		Spec: bkv1.ObjectStoreSpec{
			Endpoint:             srv.Endpoint,
			Region:               srv.Region,
			ForcePathStyle:       true,
			CredentialsSecretRef: &bkv1.SecretReference{Namespace: f.ns, Name: "store-credentials"},
			HealthCheck:          bkv1.StoreHealthCheck{Interval: &metav1.Duration{Duration: 5 * time.Second}},
			AccessProvider:       &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM},
		},
	}
	for _, m := range mutate {
		m(store)
	}
	must(t, k8s.Create(ctx, store))
	mark := logs.Len()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator logs since the test started (tail):\n%s", testenv.Tail(logs.From(mark), 8000))
		}
		f.cleanup()
	})
	return f
}

func (f *fixture) cleanup() {
	f.cleanupClaims()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = k8s.Delete(ctx, &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}})
}

// cleanupClaims abandons (Orphan) and deletes the claims and accesses of the fixture's
// namespace, and waits until they are gone.
func (f *fixture) cleanupClaims() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	buckets := &bkv1.StorageBucketList{}
	_ = k8s.List(ctx, buckets, client.InNamespace(f.ns))
	for i := range buckets.Items {
		sb := &buckets.Items[i]
		patch := client.MergeFrom(sb.DeepCopy())
		if sb.Annotations == nil {
			sb.Annotations = map[string]string{}
		}
		sb.Annotations[bkv1.AnnotationDeletionPolicy] = bkv1.DeletionPolicyOrphan
		_ = k8s.Patch(ctx, sb, patch)
		_ = k8s.Delete(ctx, sb)
	}
	accesses := &bkv1.BucketAccessList{}
	_ = k8s.List(ctx, accesses, client.InNamespace(f.ns))
	for i := range accesses.Items {
		_ = k8s.Delete(ctx, &accesses.Items[i])
	}
	err := testenv.Poll(ctx, func() error {
		_ = k8s.List(ctx, buckets, client.InNamespace(f.ns))
		_ = k8s.List(ctx, accesses, client.InNamespace(f.ns))
		if n := len(buckets.Items) + len(accesses.Items); n > 0 {
			return fmt.Errorf("%d StorageBuckets and BucketAccesses left", n)
		}
		return nil
	})
	if err != nil && !f.t.Failed() {
		f.t.Errorf("cleanup of %s: %v", f.ns, err)
	}
}

// claim creates a StorageBucket on the fixture's store.
func (f *fixture) claim(name string, mutate ...func(*bkv1.StorageBucket)) *bkv1.StorageBucket {
	f.t.Helper()
	sb := &bkv1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}},
	}
	for _, m := range mutate {
		m(sb)
	}
	must(f.t, k8s.Create(f.ctx, sb))
	return sb
}

// waitConditions waits (a minute at most) until obj, read again each time, has every
// condition of want, "Type=Status" or "Type=Status/Reason".
func (f *fixture) waitConditions(obj client.Object, want ...string) {
	f.t.Helper()
	f.waitConditionsWithin(time.Minute, obj, want...)
}

// waitConditionsWithin is waitConditions waiting d at most.
func (f *fixture) waitConditionsWithin(d time.Duration, obj client.Object, want ...string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, d)
	defer cancel()
	err := testenv.Poll(ctx, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		conds := conditionsOf(obj)
		for _, w := range want {
			typ, rest, _ := strings.Cut(w, "=")
			status, reason, _ := strings.Cut(rest, "/")
			c := apimeta.FindStatusCondition(conds, typ)
			if c == nil || string(c.Status) != status || (reason != "" && c.Reason != reason) {
				return fmt.Errorf("want %s; conditions %s", w, testenv.DescribeConditions(conds))
			}
		}
		return nil
	})
	if err != nil {
		f.t.Fatalf("%s/%s: %v", obj.GetNamespace(), obj.GetName(), err)
	}
}

func conditionsOf(obj client.Object) []metav1.Condition {
	switch o := obj.(type) {
	case *bkv1.StorageBucket:
		return o.Status.Conditions
	case *bkv1.BucketAccess:
		return o.Status.Conditions
	case *bkv1.ObjectStore:
		return o.Status.Conditions
	}
	return nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// contains fails the test unless r's output holds every want.
func (r result) contains(t *testing.T, what string, want ...string) {
	t.Helper()
	all := r.stdout + r.stderr
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("%s: output lacks %q\n%s", what, w, r)
		}
	}
}

// holdsNoSecret fails the test when r's output holds any of the secret values.
func (r result) holdsNoSecret(t *testing.T, what string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(r.stdout+r.stderr, s) {
			t.Errorf("%s: the output holds a secret value", what)
		}
	}
}
