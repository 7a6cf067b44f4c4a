// Command bench measures bucketkeeper against a raw floor and against a single global
// ticker that enqueues every bucket each interval, in one run, on the same real peers the tests use (envtest kube-apiserver + etcd,
// SeaweedFS; Ceph RGW for usage, which SeaweedFS does not report). Every compared figure is a ratio measured in the same run.
//
//	BENCH_N=1000 BENCH_SCENARIOS=converge,steady,change,memory,outage,failover,usage go run .
//
// The scale scenario (BENCH_SCALE_N buckets, default 10×BENCH_N) runs only when named:
//
//	BENCH_SCENARIOS=scale BENCH_SCALE_N=10000 go run .
//
// So does move, a bucket moved from SeaweedFS to Ceph RGW by the mover and by Debian's
// rclone (hack/peers/rclone.sh unpacks it):
//
//	BENCH_SCENARIOS=move go run .
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

const (
	concurrency = 8
	kubeQPS     = 500
	storeName   = "bench"
)

// env is what every scenario shares: the peers, an admin client and the built binary.
type env struct {
	ctx        context.Context
	n          int
	dir        string
	results    string
	bin        string
	kubeconfig string
	cfg        *rest.Config
	k8s        client.Client
	watcher    client.WithWatch // the same counted client, for watches
	harness    *requestCounter  // the harness's own API requests, to subtract
	s3         *testenv.S3Server
	cp         *testenv.ControlPlane
	summary    []summaryLine
}

type summaryLine struct{ Scenario, Figure, Value, Target string }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	log.SetLogger(logr.Discard()) // the harness's own client logs are noise here
	n, _ := strconv.Atoi(os.Getenv("BENCH_N"))
	if n <= 0 {
		n = 1000
	}
	scenarios := strings.Split(envOr("BENCH_SCENARIOS", defaultScenarios), ",")
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bucketkeeper-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	e := &env{ctx: context.Background(), n: n, dir: dir, results: filepath.Join(root, "bench", "results")}
	if err := os.MkdirAll(e.results, 0o755); err != nil {
		return err
	}

	fmt.Println(">> building the manager binary")
	e.bin = filepath.Join(dir, "bucketkeeper")
	// The benchbaseline tag adds --probe-strategy=global-ticker, the baseline the
	// scheduler is measured against; the default build has no such flag.
	build := exec.Command("go", "build", "-tags", "benchbaseline", "-o", e.bin, "./cmd/bucketkeeper")
	build.Dir, build.Stdout, build.Stderr = root, os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return err
	}
	fmt.Println(">> starting kube-apiserver, etcd and SeaweedFS")
	if e.cp, err = testenv.StartControlPlane(); err != nil {
		return err
	}
	defer e.cp.Stop()
	if e.s3, err = testenv.StartS3(testenv.SeaweedFS); err != nil {
		return err
	}
	defer e.s3.Close()
	if err := e.connect(); err != nil {
		return err
	}
	if err := e.createStore(); err != nil {
		return err
	}

	for _, s := range scenarios {
		start := time.Now()
		fmt.Printf("\n== %s (N=%d)\n", s, n)
		var err error
		switch strings.TrimSpace(s) {
		case "converge":
			err = e.converge()
		case "steady":
			err = e.steady()
		case "change":
			err = e.change()
		case "memory":
			err = e.memory()
		case "outage":
			err = e.outage()
		case "failover":
			err = e.failover()
		case "usage":
			err = e.usage()
		case "scale":
			err = e.scale()
		case "move":
			err = e.move()
		default:
			err = fmt.Errorf("unknown scenario %q", s)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		fmt.Printf("== %s done in %s\n", s, time.Since(start).Round(time.Second))
	}
	return e.writeSummary(summaryFile(scenarios))
}

// defaultScenarios are the scenarios `make bench` runs unless BENCH_SCENARIOS names others.
const defaultScenarios = "converge,steady,change,memory,outage,failover,usage"

// summaryFile is where a run's summary table goes: README.md for a run that measured
// any of the default scenarios, else a file of its own (scale.md for the scale point),
// so a run of the optional scenarios alone does not replace the default run's table.
func summaryFile(scenarios []string) string {
	for _, s := range scenarios {
		if slices.Contains(strings.Split(defaultScenarios, ","), strings.TrimSpace(s)) {
			return "README.md"
		}
	}
	return strings.Join(scenarios, "-") + ".md"
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// connect makes the admin client (its requests counted) and a kubeconfig file for the
// manager processes.
func (e *env) connect() error {
	e.cfg = rest.CopyConfig(e.cp.Config)
	e.cfg.QPS, e.cfg.Burst = kubeQPS, 2*kubeQPS
	e.harness = newRequestCounter()
	counted := rest.CopyConfig(e.cfg)
	counted.Wrap(e.harness.wrap)
	var err error
	if e.watcher, err = client.NewWithWatch(counted, client.Options{Scheme: operator.Scheme()}); err != nil {
		return err
	}
	e.k8s = e.watcher
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = &clientcmdapi.Cluster{Server: e.cfg.Host, CertificateAuthorityData: e.cfg.CAData}
	kc.AuthInfos["bench"] = &clientcmdapi.AuthInfo{ClientCertificateData: e.cfg.CertData, ClientKeyData: e.cfg.KeyData, Token: e.cfg.BearerToken}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	kc.CurrentContext = "bench"
	e.kubeconfig = filepath.Join(e.dir, "kubeconfig")
	return clientcmd.WriteToFile(*kc, e.kubeconfig)
}

// createStore registers SeaweedFS with a budget high enough that the store is never
// what limits the measurement.
func (e *env) createStore() error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench-system"}}
	if err := e.k8s.Create(e.ctx, ns); err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "store"},
		StringData: map[string]string{"accessKeyID": e.s3.AccessKeyID, "secretAccessKey": e.s3.SecretAccessKey}}
	if err := e.k8s.Create(e.ctx, secret); err != nil {
		return err
	}
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: storeName}, Spec: bkv1.ObjectStoreSpec{
		Endpoint: e.s3.Endpoint, Region: e.s3.Region, ForcePathStyle: true,
		CredentialsSecretRef: &bkv1.SecretReference{Namespace: ns.Name, Name: "store"},
		HealthCheck:          bkv1.StoreHealthCheck{Interval: &metav1.Duration{Duration: 5 * time.Second}},
		RequestsPerSecond:    10000, Burst: 10000,
	}}
	return e.k8s.Create(e.ctx, store)
}

// result is one scenario's JSON file.
func (e *env) writeResult(scenario string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(e.results, scenario+".json"), append(data, '\n'), 0o644)
}

func (e *env) note(scenario, figure, value, target string) {
	e.summary = append(e.summary, summaryLine{scenario, figure, value, target})
	fmt.Printf("   %-42s %-28s target %s\n", figure, value, target)
}

func (e *env) writeSummary(file string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmark results\n\nGenerated by `make bench` on %s with BENCH_N=%d (2-core machine, real kube-apiserver + etcd and SeaweedFS on loopback; Ceph RGW for usage). Every compared figure is a ratio measured in the same run.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), e.n)
	b.WriteString("| scenario | figure | value | target |\n|---|---|---|---|\n")
	for _, l := range e.summary {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", l.Scenario, l.Figure, l.Value, l.Target)
	}
	if file != "README.md" {
		b.WriteString("\nThe default scenarios' table is in [README.md](README.md) here and in docs/performance.md, from a run of its own. Raw figures: the `*.json` files beside this one.\n")
		return os.WriteFile(filepath.Join(e.results, file), []byte(b.String()), 0o644)
	}
	b.WriteString("\nPlots: `probes-per-second.png` (ours vs the global ticker), `rss.png` (manager memory by bucket count), `failover-s3-per-second.png` (S3 requests around the leader's SIGKILL). " +
		"Profiles (`go tool pprof -top <file>`): `converge-cpu.pb.gz`, `cpu-scheduler.pb.gz` and `cpu-global-ticker.pb.gz` (steady), `heap.pb.gz` (memory at 5N). Raw figures: the `*.json` files beside this one.\n")
	return os.WriteFile(filepath.Join(e.results, file), []byte(b.String()), 0o644)
}
