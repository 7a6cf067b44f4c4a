package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// The suite runs one real control plane, one SeaweedFS, one Versity and one Ceph RGW
// server, moto as the AWS stand-in, and one manager built exactly as the binary builds it. Each test makes its own
// namespace and ObjectStore, so S3 requests are counted per test by store name.
//
// Tests that spend their time waiting on sync and probe intervals call t.Parallel: Go
// runs them together, after every other test of the package. At most one of them may
// run a manager of its own on isolated StorageBuckets (such a manager serves every
// isolated bucket of the cluster); none may stop a server other tests use or depend on
// the manager's log or on tight timing.
var (
	k8s      client.Client
	k8sWatch client.WithWatch
	cfg      *rest.Config
	// clusterID is what the managers tag buckets with; reconcilers a test builds by
	// hand need it to recognise those buckets as this cluster's.
	clusterID string
	seaweed   *testenv.S3Server
	versity   *testenv.S3Server
	// rgw answers a repeat CreateBucket by its owner with 200, as AWS does in
	// us-east-1: the store on which two claims of one name race.
	rgw *testenv.S3Server
	// moto stands in for AWS (TestOperatorRunsUnderTheAWSPolicy); it is not one of
	// everyStore: an emulator proves nothing about data safety.
	moto *testenv.S3Server
	// issuer issues the control plane's ServiceAccount tokens (keyless access), and
	// rgwSTS is a Ceph RGW that serves STS and trusts it (which changes how RGW
	// answers a wrong key: see testenv.S3Options.RGWSTS).
	issuer   *testenv.Issuer
	rgwSTS   *testenv.S3Server
	requests = &requestLog{}
	// iamRequests counts the IAM requests of the suite's managers per store and
	// operation, and when each was sent.
	iamRequests = &requestLog{timed: true}
	logs        = &testenv.LogBuffer{}

	// The suite's manager serves the probe webhook here, with a cluster-wide key and
	// the namespaced keys of receiverKeysNamespace (the operator's namespace in a
	// cluster).
	receiverAddr   string
	receiverSecret = []byte("suite-receiver-secret-0123456789")
)

const receiverKeysNamespace = "bucketkeeper-receiver-keys"

// moverNamespace holds the checkpoints of the suite's moves between stores.
const moverNamespace = "bucketkeeper-moves"

// everyStore returns the real S3 servers of the suite, for the tests whose outcome the store's
// behaviour decides (what a tenant or a key it was handed can do, how keys are issued,
// rotated and revoked, how a bucket is emptied): they run once on each.
func everyStore() []*testenv.S3Server { return []*testenv.S3Server{seaweed, versity, rgw} }

// syncInterval is short so drift correction and stalled-object resyncs happen within a
// test; production defaults to 10m.
const syncInterval = 4 * time.Second

// usageInterval is the least time between two usage reads of a bucket; production
// defaults to 5m.
const usageInterval = time.Second

// collectInterval is the suite manager's access collector interval; production
// defaults to 5m.
const collectInterval = 2 * time.Second

// cancelledMoveKeep is how long the managers keep a cancelled move's target; production
// defaults to 10m.
const cancelledMoveKeep = 20 * time.Second

// maxConcurrentMoves bounds the moves of each manager: the suite's runs the moves of
// every test at once, whose own stores bound them (TestPacedMovesShareTheStoresBudget
// and its neighbours); production defaults to 4.
const maxConcurrentMoves = 32

// isolatedLabel marks objects the suite's manager ignores, for tests that run their own
// manager (crash and restart). Its value is the test's namespace, and a test's own
// managers select only that value (isolatedLabel=<namespace>): tests run side by side,
// and a manager of one (a cleanup manager, say) must never reconcile another's objects.
const isolatedLabel = "test.bucketkeeper.io/isolated"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true)))
	// The control plane's ServiceAccount tokens are issued by an issuer on port 443 of
	// a loopback address, which RGW and Versity trust (keyless access).
	var err error
	if issuer, err = testenv.NewIssuer(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer issuer.Close()
	suite, err := testenv.StartSuiteWith(testenv.SuiteOptions{Issuer: issuer}, operator.Scheme(), testenv.SeaweedFS, testenv.Versity, testenv.RGW, testenv.Moto)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer suite.Stop()
	cfg, k8sWatch, k8s = suite.Config, suite.Client, suite.Client
	seaweed, versity, rgw, moto = suite.Servers[0], suite.Servers[1], suite.Servers[2], suite.Servers[3]
	rgwSTS = suite.KeylessRGW
	if clusterID, err = operator.DefaultClusterID(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if receiverAddr, err = testenv.FreeAddr(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, ns := range []string{receiverKeysNamespace, moverNamespace} {
		if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A short key grace so rotations finish within a test, and a short collector
	// interval so revocations the controller missed happen within one.
	done, err := startManager(ctx, operator.Options{WatchLabelSelector: "!" + isolatedLabel, AccessKeyGrace: 3 * time.Second,
		AccessCollectInterval: collectInterval, MoverNamespace: moverNamespace})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	cancel()
	<-done
	code = quotaTable.CheckAfterRun(code, quotaTableStores)
	code = lockTable.CheckAfterRun(code, lockTableStores)
	code = checkAWSRequests(code)
	return moveTable.CheckAfterRun(code, moveTableStores)
}

// startManager runs a manager with test defaults; done closes when it has stopped.
func startManager(ctx context.Context, opts operator.Options) (<-chan struct{}, error) {
	return startManagerOn(ctx, cfg, opts)
}

// startManagerOn is startManager talking to the API server through restCfg (a test
// may wrap its transport).
func startManagerOn(ctx context.Context, restCfg *rest.Config, opts operator.Options) (<-chan struct{}, error) {
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
	if opts.SyncInterval == 0 {
		opts.SyncInterval = syncInterval
	}
	if opts.UsageInterval == 0 {
		opts.UsageInterval = usageInterval
	}
	if opts.CancelledMoveKeep == 0 {
		opts.CancelledMoveKeep = cancelledMoveKeep
	}
	if opts.MaxConcurrentMoves == 0 {
		opts.MaxConcurrentMoves = maxConcurrentMoves
	}
	if opts.S3Observer == nil {
		opts.S3Observer = requests.observe
	}
	if opts.IssuerHTTPClient == nil {
		opts.IssuerHTTPClient = issuer.HTTPClient()
	}
	if opts.IAMObserver == nil {
		opts.IAMObserver = iamRequests.observe
	}
	recordAWSRequests(&opts)
	if opts.ReceiverBindAddress == "" && receiverAddr != "" && opts.WatchLabelSelector == "!"+isolatedLabel {
		opts.ReceiverBindAddress, opts.ReceiverClusterWideSecret, opts.ReceiverKeysNamespace = receiverAddr, receiverSecret, receiverKeysNamespace
	}
	mgr, err := operator.New(restCfg, opts)
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return done, nil
}

// requestLog counts requests per store and operation; a timed one also keeps when
// each was sent.
type requestLog struct {
	mu     sync.Mutex
	counts map[string]map[string]int
	timed  bool
	at     map[string][]time.Time // by "<store>/<operation>"
}

func (l *requestLog) observe(store, op string, _ int, _ error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[string]map[string]int{}
	}
	if l.counts[store] == nil {
		l.counts[store] = map[string]int{}
	}
	l.counts[store][op]++
	if l.timed {
		if l.at == nil {
			l.at = map[string][]time.Time{}
		}
		l.at[store+"/"+op] = append(l.at[store+"/"+op], time.Now())
	}
}

// times returns when the requests of one operation on one store were sent.
func (l *requestLog) times(store, op string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.at[store+"/"+op]...)
}

// snapshot returns the counts of one store so far.
func (l *requestLog) snapshot(store string) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for op, n := range l.counts[store] {
		out[op] = n
	}
	return out
}

func since(before, after map[string]int) (total, mutating int, ops map[string]int) {
	ops = map[string]int{}
	for op, n := range after {
		if d := n - before[op]; d > 0 {
			ops[op] = d
			total += d
			if s3.IsMutating(op) {
				mutating += d
			}
		}
	}
	return total, mutating, ops
}

// fixture is one test's namespace and store.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	ns     string
	store  string
	server *testenv.S3Server
	admin  s3.Client
}

// newFixture makes a namespace, a credentials Secret and an ObjectStore on server, and
// waits for the store to be Ready.
func newFixture(t *testing.T, server *testenv.S3Server, mutate ...func(*bkv1.ObjectStore)) *fixture {
	t.Helper()
	return newFixtureAs(t, server, server.AccessKeyID, server.SecretAccessKey, mutate...)
}

// newFixtureAs is newFixture with the operator holding another key of the server than
// its admin's; the fixture's admin client still holds the admin's.
func newFixtureAs(t *testing.T, server *testenv.S3Server, accessKeyID, secretAccessKey string, mutate ...func(*bkv1.ObjectStore)) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sb-test-"}}
	must(t, k8s.Create(ctx, ns))
	f := &fixture{t: t, ctx: ctx, ns: ns.Name, store: "store-" + ns.Name, server: server}
	must(t, k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "store-credentials"},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: accessKeyID, bkv1.CredentialsKeySecretAccessKey: secretAccessKey},
	}))
	store := &bkv1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: f.store},
		Spec: bkv1.ObjectStoreSpec{
			Endpoint:             server.Endpoint,
			Region:               server.Region,
			ForcePathStyle:       true,
			CredentialsSecretRef: &bkv1.SecretReference{Namespace: f.ns, Name: "store-credentials"},
			HealthCheck:          bkv1.StoreHealthCheck{Interval: &metav1.Duration{Duration: 5 * time.Second}},
			// As the store's admin would set it where ListBuckets does not name the
			// account that owns the operator's buckets.
			Guardrails: bkv1.StoreGuardrails{AdoptionBucketOwner: server.BucketOwnerID},
		},
	}
	for _, m := range mutate {
		m(store)
	}
	must(t, k8s.Create(ctx, store))
	t.Cleanup(func() { f.deleteStore() })
	admin, err := s3.New(ctx, s3.Config{Endpoint: server.Endpoint, Region: server.Region, ForcePathStyle: true,
		AccessKeyID: server.AccessKeyID, SecretAccessKey: server.SecretAccessKey})
	must(t, err)
	f.admin = admin
	return f
}

// deleteStore removes every StorageBucket of the test, then its store, so one test's
// leftovers never block another.
func (f *fixture) deleteStore() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list := &bkv1.StorageBucketList{}
	_ = k8s.List(ctx, list, client.InNamespace(f.ns))
	for i := range list.Items {
		_ = k8s.Delete(ctx, &list.Items[i])
	}
	_ = k8s.Delete(ctx, &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}})
}

func (f *fixture) bucket(name string, mutate ...func(*bkv1.StorageBucket)) *bkv1.StorageBucket {
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

// eventually polls cond until it returns nil or the timeout passes.
func (f *fixture) eventually(timeout time.Duration, what string, cond func() error) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
}

// update applies change to the latest version of obj, read with c (the operator's
// client or a tenant's), and writes it, retrying when a controller's status write
// came in between, as kubectl edit would be retried.
func (f *fixture) update(c client.Client, obj client.Object, change func()) {
	f.t.Helper()
	must(f.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(f.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return c.Update(f.ctx, obj)
	}))
}

func (f *fixture) get(sb *bkv1.StorageBucket) *bkv1.StorageBucket {
	f.t.Helper()
	got := &bkv1.StorageBucket{}
	must(f.t, k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), got))
	return got
}

// waitCondition waits until sb has condition typ with the given status and reason
// (reason "" matches any) at its current generation.
func (f *fixture) waitCondition(sb *bkv1.StorageBucket, typ string, status metav1.ConditionStatus, reason string) *bkv1.StorageBucket {
	f.t.Helper()
	var got *bkv1.StorageBucket
	f.eventually(60*time.Second, fmt.Sprintf("%s=%s (%s) on %s", typ, status, reason, sb.Name), func() error {
		got = &bkv1.StorageBucket{}
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(got.Status.Conditions, typ)
		if c == nil || c.Status != status || (reason != "" && c.Reason != reason) || c.ObservedGeneration != got.Generation {
			return fmt.Errorf("conditions: %s", describe(got.Status.Conditions))
		}
		return nil
	})
	return got
}

func describe(conds []metav1.Condition) string {
	var b bytes.Buffer
	for _, c := range conds {
		fmt.Fprintf(&b, "[%s=%s %s: %s] ", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func (f *fixture) waitGone(obj client.Object) {
	f.t.Helper()
	f.eventually(60*time.Second, "deletion of "+obj.GetName(), func() error {
		err := k8s.Get(f.ctx, client.ObjectKeyFromObject(obj), obj)
		if err == nil {
			return fmt.Errorf("still there; conditions: %v", obj)
		}
		return client.IgnoreNotFound(err)
	})
}

// events returns the reasons of the Events recorded for obj.
func (f *fixture) eventReasons(obj client.Object) map[string]int {
	f.t.Helper()
	list := &eventsv1.EventList{}
	must(f.t, k8s.List(f.ctx, list, client.InNamespace(obj.GetNamespace())))
	out := map[string]int{}
	for _, e := range list.Items {
		if e.Regarding.Name == obj.GetName() {
			out[e.Reason]++
		}
	}
	return out
}

// waitEvent waits until obj has an Event with the reason and returns the counts by
// reason: Events are sent by the recorder's own goroutine, after the status write a
// test usually waits for, so they must be waited for in turn.
func (f *fixture) waitEvent(obj client.Object, reason string) map[string]int {
	f.t.Helper()
	var ev map[string]int
	f.eventually(30*time.Second, "a "+reason+" event on "+obj.GetName(), func() error {
		if ev = f.eventReasons(obj); ev[reason] == 0 {
			return errf("events %v", ev)
		}
		return nil
	})
	return ev
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
