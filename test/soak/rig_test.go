package soak_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/invariants"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// Names the soak gives what it makes.
const (
	// systemNamespace holds the stores' credentials Secrets.
	systemNamespace = "soak-system"
	// labelTenant marks the tenant namespaces; every store admits them.
	labelTenant = "soak.bucketkeeper.io/tenant"
	// labelTier is what the Versity store also asks of a namespace (tierGold): relabelling
	// a namespace takes its Versity buckets from it (a guardrail refusal).
	labelTier = "soak.bucketkeeper.io/tier"
	tierGold  = "gold"
)

// Operator timings of the soak: short enough that a round settles in seconds, as long
// as the leader election on a loaded 2-core machine needs.
const (
	collectInterval = 15 * time.Second
	leaseDuration   = 10 * time.Second
	renewDeadline   = 7 * time.Second
	retryPeriod     = 2 * time.Second
)

// storeRig is one store: the real server, the proxies the operator reaches it through
// (outages happen there), its ObjectStore, and the admin's view the checker reads.
type storeRig struct {
	srv      *testenv.S3Server
	name     string // the ObjectStore's
	proxies  []*tcpProxy
	admin    s3.Client // direct, never through the proxy
	view     invariants.StoreView
	mu       sync.Mutex
	down     outageMode // up when reachable
	stopped  bool       // the server's process itself was stopped
	outageID int
}

// replica is one process of the operator's binary.
type replica struct {
	name    string
	logPath string
	args    []string

	mu        sync.Mutex
	proc      *testenv.Process
	logOffset int64 // where the current process's output starts
	planned   bool  // the current process was killed on purpose
}

// rig is everything a soak runs on: the stores, the operator's replicas and the cluster
// id the checker judges by.
type rig struct {
	t         *testing.T
	clusterID string
	stores    []*storeRig
	replicas  []*replica
	dir       string
	// retained holds the UIDs of the StorageBuckets whose deletion may leave their
	// bucket as it was (types.UID to struct{}, invariants.Retained): those whose
	// deletionPolicy the soak last wrote as Retain, and those whose finalizer a tenant
	// stripped.
	retained sync.Map

	// strippedUntagged holds, by bucket name, when the CreateBucket was sent of each
	// claim a tenant stripped of its finalizer before its bucket was tagged
	// (time.Time). Such a claim's deletion policy is carried out only by the process
	// that sent the create (docs/concepts.md): once the soak has SIGKILLed the leader
	// since (leaderKills), the bucket the create made may stay untagged, as documented.
	strippedUntagged sync.Map
	killsMu          sync.Mutex
	leaderKills      []time.Time
}

// noteLeaderKill records that the leader was SIGKILLed now.
func (r *rig) noteLeaderKill() {
	r.killsMu.Lock()
	defer r.killsMu.Unlock()
	r.leaderKills = append(r.leaderKills, time.Now())
}

// noteStripped records a claim the tenant stripped of its finalizer, as the API server
// held it then: a create sent for a bucket not yet recorded as the claim's (so perhaps
// never tagged) is remembered (strippedUntagged).
func (r *rig) noteStripped(sb *bkv1.StorageBucket) {
	if in := sb.Status.CreateIntent; in != nil && in.SentAt != nil && sb.Status.BucketName != in.BucketName {
		r.strippedUntagged.Store(in.BucketName, in.SentAt.Time)
	}
}

// lostWithItsSender says whether bucket may be left untagged by design: the create of a
// claim stripped of its finalizer before tagging, whose sender was killed since (the
// intent's time is to the second).
func (r *rig) lostWithItsSender(bucket string) bool {
	sent, ok := r.strippedUntagged.Load(bucket)
	if !ok {
		return false
	}
	r.killsMu.Lock()
	defer r.killsMu.Unlock()
	for _, killed := range r.leaderKills {
		if !killed.Before(sent.(time.Time).Add(-time.Second)) {
			return true
		}
	}
	return false
}

// newRig makes the stores' ObjectStores (through fresh proxies), the credentials
// Secrets and the tenant label selectors, and starts two replicas of the operator.
func newRig(t *testing.T, ctx context.Context) *rig {
	t.Helper()
	r := &rig{t: t, dir: t.TempDir()}
	ks := &corev1.Namespace{}
	must(t, k8s.Get(ctx, client.ObjectKey{Name: "kube-system"}, ks))
	r.clusterID = string(ks.UID) // the operator's default --cluster-id
	must(t, ignoreExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}})))
	for _, srv := range servers {
		r.stores = append(r.stores, r.addStore(ctx, srv))
	}
	kubeconfig := filepath.Join(r.dir, "kubeconfig")
	must(t, testenv.WriteKubeconfig(kubeconfig, "envtest", "default", cfg))
	logs := r.dir
	if dir := os.Getenv(envLogs); dir != "" {
		must(t, os.MkdirAll(dir, 0o755))
		logs = dir
	}
	for _, name := range []string{"a", "b"} {
		rep := &replica{name: name, logPath: filepath.Join(logs, "operator-"+name+".log"), args: []string{
			"--kubeconfig", kubeconfig,
			"--leader-elect", "--leader-election-namespace", systemNamespace,
			"--leader-election-lease-duration", leaseDuration.String(),
			"--leader-election-renew-deadline", renewDeadline.String(),
			"--leader-election-retry-period", retryPeriod.String(),
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
			"--access-collect-interval", collectInterval.String(),
			"--access-key-grace", "20s",
			"--s3-request-timeout", "10s",
			"--zap-log-level", "info",
		}}
		must(t, rep.start())
		r.replicas = append(r.replicas, rep)
	}
	for _, sr := range r.stores {
		r.waitStoreReady(ctx, sr)
	}
	t.Cleanup(func() {
		for _, rep := range r.replicas {
			rep.stop(t)
		}
		for _, sr := range r.stores {
			for _, p := range sr.proxies {
				_ = p.Close()
			}
			if sr.isStopped() {
				if err := sr.srv.Start(); err != nil {
					t.Errorf("starting %s again: %v", sr.srv.Kind, err)
				}
			}
		}
	})
	return r
}

func (r *rig) addStore(ctx context.Context, srv *testenv.S3Server) *storeRig {
	t := r.t
	sr := &storeRig{srv: srv, name: "soak-" + string(srv.Kind), down: up}
	through := func(endpoint string) string {
		u, err := url.Parse(endpoint)
		must(t, err)
		p, err := newTCPProxy(u.Host)
		must(t, err)
		sr.proxies = append(sr.proxies, p)
		return "http://" + p.Addr
	}
	endpoint := through(srv.Endpoint)
	provider := &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM}
	if srv.IAMEndpoint != srv.Endpoint {
		provider.IAM = &bkv1.IAMAccessProvider{Endpoint: through(srv.IAMEndpoint)}
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: sr.name + "-creds"},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: srv.AccessKeyID, bkv1.CredentialsKeySecretAccessKey: srv.SecretAccessKey},
	}
	must(t, k8s.Create(ctx, secret))
	admitted := map[string]string{labelTenant: "true"}
	if srv.Kind == testenv.Versity {
		admitted[labelTier] = tierGold
	}
	store := &bkv1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: sr.name},
		Spec: bkv1.ObjectStoreSpec{
			Endpoint:             endpoint,
			Region:               srv.Region,
			ForcePathStyle:       true,
			CredentialsSecretRef: &bkv1.SecretReference{Namespace: systemNamespace, Name: secret.Name},
			HealthCheck:          bkv1.StoreHealthCheck{Interval: &metav1.Duration{Duration: 5 * time.Second}},
			AllowedNamespaces:    &metav1.LabelSelector{MatchLabels: admitted},
			AccessProvider:       provider,
		},
	}
	must(t, k8s.Create(ctx, store))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = k8s.Delete(ctx, store)
		_ = k8s.Delete(ctx, secret)
	})
	admin, err := s3.New(ctx, s3.Config{Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
		AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey})
	must(t, err)
	sr.admin = admin
	sr.view = invariants.StoreView{Name: sr.name, S3: admin, IAM: invariants.SDKIAM{Client: srv.IAMClient()},
		// Every other bucket on these stores is the operator's: the checker's test tags
		// and removes its own. One the operator made and may never tag (lostWithItsSender)
		// is judged as the harness's.
		Foreign: func(bucket string) bool {
			return bucket == srv.ScopedBucket || strings.HasPrefix(bucket, "chk-") || r.lostWithItsSender(bucket)
		}}
	return sr
}

// waitStoreReady waits until the store's ObjectStore is Ready with its IAM answering;
// the operator health-checks it.
func (r *rig) waitStoreReady(ctx context.Context, sr *storeRig) {
	r.t.Helper()
	store := &bkv1.ObjectStore{}
	must(r.t, poll(ctx, 2*time.Minute, func() error {
		if err := k8s.Get(ctx, client.ObjectKey{Name: sr.name}, store); err != nil {
			return err
		}
		for _, typ := range []string{bkv1.ConditionReady, bkv1.ConditionAccessProviderReady} {
			if c := findCondition(store.Status.Conditions, typ); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("ObjectStore %s: %s", sr.name, testenv.DescribeConditions(store.Status.Conditions))
			}
		}
		return nil
	}))
}

// check runs the checker on the cluster and every store.
func (r *rig) check(ctx context.Context) []invariants.Violation {
	// The replicas run their movers in process, keeping a move's objects in their
	// leader-election namespace.
	return invariants.Check(ctx, k8s, r.views(), r.clusterID, invariants.MoverNamespace(systemNamespace), invariants.Retained(func(uid types.UID) bool {
		_, ok := r.retained.Load(uid)
		return ok
	}))
}

// notePolicy records the deletionPolicy the soak wrote into sb (rig.retained).
func (r *rig) notePolicy(sb *bkv1.StorageBucket) {
	if p := sb.Spec.DeletionPolicy; p == "" || p == bkv1.DeletionPolicyRetain {
		r.retained.Store(sb.UID, struct{}{})
	} else {
		r.retained.Delete(sb.UID)
	}
}

func (r *rig) views() []invariants.StoreView {
	out := make([]invariants.StoreView, 0, len(r.stores))
	for _, sr := range r.stores {
		out = append(out, sr.view)
	}
	return out
}

func (sr *storeRig) isStopped() bool {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return sr.stopped
}

// start runs the replica's binary, its output appended to its log.
func (rep *replica) start() error {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	return rep.startLocked()
}

// ensureRunning starts the replica again unless it runs; started says it did.
func (rep *replica) ensureRunning() (started bool, err error) {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	if rep.proc != nil && !rep.proc.Exited() {
		return false, nil
	}
	return true, rep.startLocked()
}

func (rep *replica) startLocked() error {
	if st, err := os.Stat(rep.logPath); err == nil {
		rep.logOffset = st.Size()
	}
	proc, err := testenv.StartProcess(operatorBin, rep.args, nil, "", rep.logPath)
	if err != nil {
		return fmt.Errorf("start operator replica %s: %w", rep.name, err)
	}
	rep.proc, rep.planned = proc, false
	return nil
}

// kill sends SIGKILL to the running process, as a node's death would.
func (rep *replica) kill() {
	rep.mu.Lock()
	p := rep.proc
	rep.planned = true
	rep.mu.Unlock()
	if p != nil && !p.Exited() { // a reaped process's PID may be another's by now
		p.Kill()
	}
}

func (rep *replica) exited() bool {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	return rep.proc == nil || rep.proc.Exited()
}

// acquired is client-go's leader-election log line.
var acquired = regexp.MustCompile(`(?i)successfully acquired lease`)

// leads says whether the running process has acquired the lease (its log says so).
func (rep *replica) leads() bool {
	rep.mu.Lock()
	off, p := rep.logOffset, rep.proc
	rep.mu.Unlock()
	if p == nil || p.Exited() {
		return false
	}
	return acquired.MatchString(rep.logSince(off))
}

func (rep *replica) logSince(off int64) string {
	b, err := os.ReadFile(rep.logPath)
	if err != nil || int64(len(b)) < off {
		return ""
	}
	return string(b[off:])
}

// currentLog is what the running (or last) process wrote.
func (rep *replica) currentLog() string {
	rep.mu.Lock()
	off := rep.logOffset
	rep.mu.Unlock()
	return rep.logSince(off)
}

func (rep *replica) stop(t *testing.T) {
	rep.mu.Lock()
	p := rep.proc
	rep.planned = true
	rep.mu.Unlock()
	if p != nil {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.Logf("--- operator replica %s, tail ---\n%s", rep.name, testenv.Tail(rep.currentLog(), 3000))
	}
}
