package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/localpeers"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
)

// shutdownBudget is how long a clean stop may take after Ctrl-C or SIGTERM before
// the watchdog kills the control plane by PID and exits: under the 10 s a person
// (or a supervisor's stop timeout) waits.
const shutdownBudget = 8 * time.Second

// run starts everything, waits for a signal, readiness or a failure, and stops
// everything in reverse order. It returns the exit code.
func run(o *options) int {
	start := time.Now()
	table := os.Stdout // stdout is the table's alone; see redirectStdout
	logs := &logSink{}
	if o.verbose {
		logs.tee = os.Stderr
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logs)))
	klog.SetLogger(ctrl.Log.WithName("klog"))
	log.SetOutput(logs) // Versity's warnings

	root, err := localpeers.RepoRoot()
	if err != nil {
		progress("%v (run it from inside the repository)", err)
		return 1
	}
	o.dataDir, o.kubeconfig, o.samples = resolve(root, o.dataDir), resolve(root, o.kubeconfig), resolve(root, o.samples)
	samples, err := readSamples(o.samples)
	if err != nil {
		progress("samples: %v", err)
		return 1
	}
	for _, n := range samples.notes {
		progress("%s", n)
	}

	var cleanups cleanupStack
	defer cleanups.run()
	var etcdDir string
	if o.dataDir != "" {
		if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
			progress("data dir: %v", err)
			return 1
		}
		lock, err := lockDataDir(o.dataDir)
		if err != nil {
			progress("%v", err)
			return 1
		}
		cleanups.push(func() { lock.Close() })
		etcdDir = filepath.Join(o.dataDir, "etcd")
	}

	// First signal: stop cleanly. Second signal, or a clean stop that overruns its
	// budget: kill the control plane by PID and exit.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cpRef atomic.Pointer[localpeers.ControlPlane]
	go watchSignals(cancel, &cpRef, o.kubeconfig)
	// fail reports a startup error, unless it is only the fallout of Ctrl-C.
	fail := func(format string, args ...any) int {
		if ctx.Err() != nil {
			progress("stopping…")
			return 0
		}
		progress(format, args...)
		return 1
	}

	progress("starting etcd and kube-apiserver…")
	cp, err := localpeers.StartControlPlaneWith(localpeers.ControlPlaneOptions{EtcdDataDir: etcdDir, BeforeBuild: announceBuild})
	if err != nil {
		return fail("control plane: %v", err)
	}
	cpRef.Store(cp)
	cleanups.push(func() {
		if err := cp.Stop(); err != nil {
			progress("stopping the control plane: %v", err)
		}
	})
	cpUp := time.Now()
	base := o.dataDir
	if base == "" {
		base = cp.Dir() // removed by cp.Stop, swept by the next start if we are killed
	}
	if err := logs.openFile(filepath.Join(base, "bucketkeeper-dev.log")); err != nil {
		return fail("log file: %v", err)
	}
	cleanups.push(logs.close)
	redirectStdout(logs)
	progress("control plane up in %s at %s", since(start), cp.Config.Host)

	if err := localpeers.WriteKubeconfig(o.kubeconfig, "bucketkeeper-dev", "default", cp.Config); err != nil {
		return fail("kubeconfig: %v", err)
	}
	cleanups.push(func() { _ = os.Remove(o.kubeconfig) })
	progress("kubeconfig written: kubectl --kubeconfig %s get sb -A", o.kubeconfig)

	store, err := startStore(filepath.Join(base, "s3"), o.s3Port)
	if err != nil {
		return fail("S3 store: %v", err)
	}
	cleanups.push(store.Stop)
	progress("Versity S3 Gateway serving %s, its IAM service %s (root credentials in Secret %s/%s)", store.Endpoint, store.IAMEndpoint, systemNamespace, credentialsName)

	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 50, 100 // the production binary's defaults
	c, err := client.New(cfg, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		return fail("client: %v", err)
	}
	if err := bootstrap(ctx, c, store); err != nil {
		return fail("%v", err)
	}
	mgr, err := operator.New(cfg, operator.Options{
		MetricsBindAddress:     "0",
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		// Everything else is the production binary's default (internal/defaults).
	})
	if err != nil {
		return fail("operator: %v", err)
	}
	mgrCtx, stopMgr := context.WithCancel(context.Background())
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	cleanups.push(func() {
		stopMgr()
		select {
		case <-mgrDone:
		case <-time.After(shutdownBudget / 2):
			progress("operator did not stop in %s", shutdownBudget/2)
		}
	})

	token := time.Now().UTC().Format(time.RFC3339Nano)
	withAccess := samples.accessKeys()
	tbl := newTable(table, samples.keys(), withAccess, token, func() {
		keys := ""
		if len(withAccess) > 0 {
			keys = fmt.Sprintf(" (%d with a key of their own)", len(withAccess))
		}
		progress("all %d sample StorageBuckets Ready and Available%s %s after start", len(samples.buckets), keys, since(start))
	}, func(ba *bkv1.BucketAccess) {
		progress("%s/%s: key %s, scoped to its bucket, in Secret %s", ba.Namespace, ba.Name, ba.Status.AccessKeyID, ba.Spec.SecretName)
	})
	for obj, h := range map[client.Object]toolscache.ResourceEventHandler{
		&bkv1.StorageBucket{}: tbl.handler(),
		&bkv1.BucketAccess{}:  tbl.accessHandler(),
	} {
		inf, err := mgr.GetCache().GetInformer(ctx, obj)
		if err == nil {
			_, err = inf.AddEventHandler(h)
		}
		if err != nil {
			return fail("watching %T: %v", obj, err)
		}
	}
	if err := samples.apply(ctx, c, token); err != nil {
		return fail("%v", err)
	}
	progress("operator running; applied %d sample StorageBuckets from %s", len(samples.buckets), o.samples)

	var deadline <-chan time.Time
	var ready <-chan struct{}
	if o.exitWhenReady {
		deadline = time.After(o.timeout - time.Since(cpUp))
		ready = tbl.Ready()
	}
	select {
	case <-ctx.Done():
		progress("stopping…")
		return 0
	case <-ready:
		return 0
	case <-deadline:
		progress("not ready after %s:\n%s", o.timeout, strings.TrimRight(describeNotReady(context.Background(), c, samples.keys(), withAccess, token), "\n"))
		if o.dataDir != "" {
			progress("operator log: %s", filepath.Join(o.dataDir, "bucketkeeper-dev.log"))
		} else if !o.verbose {
			progress("the operator log goes with the temporary directory; rerun with -v or --data-dir to keep it")
		}
		return 1
	case err := <-mgrDone:
		return fail("operator stopped: %v", err)
	case <-store.Done():
		return fail("S3 store stopped: %v", store.Err())
	}
}

// watchSignals cancels on the first SIGINT/SIGTERM; on a second one, or when the
// clean stop overruns shutdownBudget, it kills etcd and kube-apiserver by PID
// (their whole process groups, which envtest gives them), removes what a clean stop
// would have and exits.
func watchSignals(cancel context.CancelFunc, cp *atomic.Pointer[localpeers.ControlPlane], kubeconfig string) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	<-sigs
	cancel()
	select {
	case <-sigs:
		progress("second signal: killing the control plane")
	case <-time.After(shutdownBudget):
		progress("clean stop took over %s: killing the control plane", shutdownBudget)
	}
	if c := cp.Load(); c != nil {
		for _, pid := range []int{c.APIServerPID(), c.EtcdPID()} {
			if pid > 0 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
		for _, d := range c.TempDirs() {
			_ = os.RemoveAll(d)
		}
	}
	_ = os.Remove(kubeconfig)
	os.Exit(1)
}

// cleanupStack runs what was pushed in reverse order: the operator stops before the
// store it talks to, and both before the control plane.
type cleanupStack struct{ fns []func() }

func (s *cleanupStack) push(f func()) { s.fns = append(s.fns, f) }
func (s *cleanupStack) run() {
	for i := len(s.fns) - 1; i >= 0; i-- {
		s.fns[i]()
	}
}

// logSink receives the operator's, envtest's, klog's and Versity's log lines: kept
// in memory until the log file exists (the file lives in the control plane's
// directory when there is no --data-dir), then written there, and with -v to
// stderr too.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
	f   *os.File
	tee io.Writer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tee != nil {
		_, _ = l.tee.Write(p)
	}
	if l.f != nil {
		return l.f.Write(p)
	}
	return l.buf.Write(p)
}

func (l *logSink) openFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err = l.buf.WriteTo(f)
	l.f = f
	return err
}

func (l *logSink) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}

// redirectStdout points os.Stdout at the log file: Versity's posix backend prints
// its configuration with fmt.Println, and those lines must not land in the middle
// of the table, which keeps the original stdout.
func redirectStdout(l *logSink) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		os.Stdout = l.f
	}
}
