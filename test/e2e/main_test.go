// Package e2e_test runs bucketkeeper the way it is deployed: as a least-privileged
// service account, as two replicas of the real binary sharing a lease, and as shards of
// one cluster's buckets. One control plane and SeaweedFS serve the whole package, and
// the tenant suite runs on Versity and Ceph RGW too; each test makes its own namespace
// and ObjectStore so they never see each other's buckets.
package e2e_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

var (
	// cfg is the envtest admin (system:masters); tests act as the platform team with it.
	cfg *rest.Config
	k8s client.Client
	// seaweed serves every test; versity and rgw join it in the tests whose outcome
	// the store decides (the tenant suite).
	seaweed, versity, rgw *testenv.S3Server
	// logs collects the in-process managers' logs; a failing test prints its share.
	logs = &testenv.LogBuffer{}
)

// probeInterval is the shortest the API allows, so probes happen within a test.
const probeInterval = 10 * time.Second

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true)))
	suite, err := testenv.StartSuite(operator.Scheme(), testenv.SeaweedFS, testenv.Versity, testenv.RGW)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer suite.Stop()
	cfg, k8s = suite.Config, suite.Client
	seaweed, versity, rgw = suite.Servers[0], suite.Servers[1], suite.Servers[2]
	return tenantTable.CheckAfterRun(m.Run(), tenantTableStores)
}

func stop(what string, f func() error) {
	if err := f(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping %s: %v\n", what, err)
	}
}

// startManager runs an in-process manager built exactly as the binary builds it, and
// stops it when the test ends. Register it before newFixture: cleanups run last-in
// first-out, so the fixture's deletions still find a running operator.
func startManager(t *testing.T, restCfg *rest.Config, opts operator.Options) manager.Manager {
	t.Helper()
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	mgr, err := operator.New(restCfg, opts)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(logs, "manager stopped with an error:", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("manager did not stop within 30s")
		}
	})
	mark := logs.Len()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager logs since the test started (tail):\n%s", testenv.Tail(logs.From(mark), 12000))
		}
	})
	return mgr
}

// fixture is one test's namespace, credentials Secret and ObjectStore on one server.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	ns    string
	store string
	srv   *testenv.S3Server
	s3    s3.Client // the server's admin, to check what really exists on it
}

// newFixture makes the namespace and the store; the credentials Secret lives in
// credsNamespace (the test's own namespace when empty). At the end of the test it
// deletes every StorageBucket, waits for the operator to carry out their deletion
// policy, then deletes the store.
func newFixture(t *testing.T, credsNamespace string, mutate ...func(*bkv1.ObjectStore)) *fixture {
	t.Helper()
	return newFixtureOn(t, seaweed, credsNamespace, mutate...)
}

// newFixtureOn is newFixture on the server srv.
func newFixtureOn(t *testing.T, srv *testenv.S3Server, credsNamespace string, mutate ...func(*bkv1.ObjectStore)) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	must(t, k8s.Create(ctx, ns))
	if credsNamespace == "" {
		credsNamespace = ns.Name
	}
	f := &fixture{t: t, ctx: ctx, ns: ns.Name, store: "store-" + ns.Name, srv: srv}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: credsNamespace, Name: "creds-" + ns.Name},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: srv.AccessKeyID, bkv1.CredentialsKeySecretAccessKey: srv.SecretAccessKey},
	}
	must(t, k8s.Create(ctx, secret))
	store := &bkv1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: f.store},
		Spec: bkv1.ObjectStoreSpec{
			Endpoint:             srv.Endpoint,
			Region:               srv.Region,
			ForcePathStyle:       true,
			CredentialsSecretRef: &bkv1.SecretReference{Namespace: credsNamespace, Name: secret.Name},
			HealthCheck:          bkv1.StoreHealthCheck{Interval: &metav1.Duration{Duration: 5 * time.Second}},
		},
	}
	for _, m := range mutate {
		m(store)
	}
	must(t, k8s.Create(ctx, store))
	t.Cleanup(func() {
		f.cleanup()
		_ = k8s.Delete(context.Background(), secret)
	})
	admin, err := s3.New(ctx, s3.Config{Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
		AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey})
	must(t, err)
	f.s3 = admin
	return f
}

// cleanup deletes the test's StorageBuckets and store. A leftover is an error only
// when the test otherwise passed: after a failure the operator may be gone.
func (f *fixture) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	report := f.t.Errorf
	if f.t.Failed() {
		report = f.t.Logf
	}
	list := &bkv1.StorageBucketList{}
	_ = k8s.List(ctx, list, client.InNamespace(f.ns))
	for i := range list.Items {
		_ = k8s.Delete(ctx, &list.Items[i])
	}
	if err := testenv.Poll(ctx, func() error {
		if err := k8s.List(ctx, list, client.InNamespace(f.ns)); err != nil {
			return err
		}
		if n := len(list.Items); n > 0 {
			return fmt.Errorf("%d StorageBuckets left, e.g. %s: %s", n, list.Items[0].Name, testenv.DescribeConditions(list.Items[0].Status.Conditions))
		}
		return nil
	}); err != nil {
		report("cleanup of namespace %s: %v", f.ns, err)
		return
	}
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}}
	_ = k8s.Delete(ctx, store)
	if err := testenv.Poll(ctx, func() error {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(store), store)
		if err == nil {
			return fmt.Errorf("ObjectStore %s still there: %s", f.store, testenv.DescribeConditions(store.Status.Conditions))
		}
		return client.IgnoreNotFound(err)
	}); err != nil {
		report("cleanup: %v", err)
	}
}

// bucket creates a StorageBucket probed every probeInterval whose bucket is deleted
// with it, so tests leave nothing behind on the store.
func (f *fixture) bucket(name string, labels map[string]string) *bkv1.StorageBucket {
	f.t.Helper()
	sb := &bkv1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: labels},
		Spec: bkv1.StorageBucketSpec{
			ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store},
			DeletionPolicy: bkv1.DeletionPolicyDelete,
			// The timeout is explicit: its 10s default is not shorter than a 10s
			// interval, which the API rejects.
			Probe: bkv1.ProbeSpec{Interval: &metav1.Duration{Duration: probeInterval}, Timeout: &metav1.Duration{Duration: 3 * time.Second}},
		},
	}
	must(f.t, k8s.Create(f.ctx, sb))
	return sb
}

// waitCondition waits until sb has condition typ with status (and reason, unless
// empty) at its current generation, and returns the object as last read.
func (f *fixture) waitCondition(sb *bkv1.StorageBucket, typ string, status metav1.ConditionStatus, reason string, timeout time.Duration) *bkv1.StorageBucket {
	f.t.Helper()
	got := &bkv1.StorageBucket{}
	f.eventually(timeout, fmt.Sprintf("%s=%s (%s) on %s", typ, status, reason, sb.Name), func() error {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(got.Status.Conditions, typ)
		if c == nil || c.Status != status || (reason != "" && c.Reason != reason) || c.ObservedGeneration != got.Generation {
			return fmt.Errorf("conditions: %s", testenv.DescribeConditions(got.Status.Conditions))
		}
		return nil
	})
	return got
}

// waitGone waits until obj no longer exists (its finalizer has run).
func (f *fixture) waitGone(obj client.Object, timeout time.Duration) {
	f.t.Helper()
	f.eventually(timeout, "deletion of "+obj.GetName(), func() error {
		err := k8s.Get(f.ctx, client.ObjectKeyFromObject(obj), obj)
		if err == nil {
			return fmt.Errorf("still there")
		}
		return client.IgnoreNotFound(err)
	})
}

// claimedBuckets maps each claim ("namespace/name") of this fixture's namespace to the
// buckets on SeaweedFS tagged for it, read from the server itself.
func (f *fixture) claimedBuckets() (map[string][]string, error) {
	names, err := f.s3.ListBuckets(f.ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, name := range names {
		tags, err := f.s3.GetBucketTagging(f.ctx, name)
		if s3.KindOf(err) == s3.KindNotFound {
			continue // deleted meanwhile by another test
		}
		if err != nil {
			return nil, fmt.Errorf("tags of %s: %w", name, err)
		}
		if claim := tags[bkv1.TagClaim]; strings.HasPrefix(claim, f.ns+"/") {
			out[claim] = append(out[claim], name)
		}
	}
	return out, nil
}

// eventually polls cond until it returns nil, failing the test after timeout.
func (f *fixture) eventually(timeout time.Duration, what string, cond func() error) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, timeout)
	defer cancel()
	if err := testenv.Poll(ctx, cond); err != nil {
		f.t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
