package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// pkgDir is this package's directory, taken before any test runs: TestStore's
// embedded store chdirs the process.
var pkgDir string

func TestMain(m *testing.M) {
	var err error
	if pkgDir, err = os.Getwd(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// TestDev is the smoke test behind `make dev`: the binary, as built, brings the
// samples to Ready+Available with their keys issued on a fresh data directory,
// again on a warm restart of the same directory (same buckets, decided afresh),
// serves a kubeconfig that works, each sample's access Secret alone lets a client
// use its bucket and no other (keys issued by the first run, across two restarts),
// with the aws CLI too,
// and on SIGTERM stops within 10 s leaving no process behind.
//
// It runs the default sample set, config/samples/dev: the general samples use
// lifecycle, which Versity does not implement (the operator rightly reports
// NotSupportedByStore there).
func TestDev(t *testing.T) {
	bin := buildDev(t)
	peers := devPeers(t)
	data := filepath.Join(t.TempDir(), "data")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	args := []string{"--data-dir", data, "--kubeconfig", kubeconfig}

	fresh := runDev(t, bin, peers, append(args, "--exit-when-ready", "--timeout", "2m"))
	t.Logf("fresh start: Ready+Available after %s", fresh.readyAfter)
	assertNoPeerLeft(t, data)
	if _, err := os.Stat(kubeconfig); !os.IsNotExist(err) {
		t.Errorf("kubeconfig left behind: %v", err)
	}

	warm := runDev(t, bin, peers, append(args, "--exit-when-ready", "--timeout", "2m"))
	t.Logf("warm start: Ready+Available after %s", warm.readyAfter)
	assertNoPeerLeft(t, data)
	for key, bucket := range fresh.buckets {
		if warm.buckets[key] != bucket {
			t.Errorf("%s: bucket %q on the fresh run, %q on the warm one", key, bucket, warm.buckets[key])
		}
		if fi, err := os.Stat(filepath.Join(data, "s3", "objects", bucket)); err != nil || !fi.IsDir() {
			t.Errorf("bucket %s not on disk: %v", bucket, err)
		}
	}

	// Interactive, as `make dev` runs: the kubeconfig works while it runs, and
	// SIGTERM stops everything within 10 s.
	cmd, stderr := startDev(t, bin, peers, args)
	waitFor(t, stderr, readyLine, 2*time.Minute)
	assertKubeconfigWorks(t, kubeconfig, len(fresh.buckets))
	assertSampleKeysScoped(t, kubeconfig, fresh.buckets)
	assertAWSCLIWithTheSecret(t, kubeconfig, fresh.buckets)
	begin := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("SIGTERM to exit took %s, want under 10s", took)
	}
	assertNoPeerLeft(t, data)
}

// buildDev builds the binary as `make dev` would run it.
func buildDev(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bucketkeeper-dev")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = pkgDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// devPeers builds etcd and kube-apiserver up front (minutes on a cold cache) so the
// runs below are timed on a warm one, as every `make dev` after the first is.
func devPeers(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("BUCKETKEEPER_PEERS_BIN"); dir != "" {
		return dir
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "hack", "peers", "build.sh"), "etcd", "kube-apiserver")
	cmd.Dir, cmd.Stderr = root, os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/peers/build.sh: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

type devRun struct {
	readyAfter time.Duration
	buckets    map[string]string // namespace/name -> bucket, from the table's Ready rows
}

// readyLine is printed once every sample is Ready and Available and every
// sample's key is in its Secret.
var readyLine = regexp.MustCompile(`Ready and Available \(\d+ with a key of their own\) (\S+) after start`)

func runDev(t *testing.T, bin, peers string, args []string) devRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = pkgDir, &stdout, &stderr
	cmd.Env = append(os.Environ(), "BUCKETKEEPER_PEERS_BIN="+peers)
	if err := cmd.Run(); err != nil {
		t.Fatalf("bucketkeeper-dev %s: %v\n--- stdout ---\n%s--- stderr ---\n%s", strings.Join(args, " "), err, &stdout, &stderr)
	}
	run := devRun{buckets: map[string]string{}}
	m := readyLine.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no readiness line on stderr:\n%s", &stderr)
	}
	run.readyAfter, _ = time.ParseDuration(m[1])
	lines := strings.Split(stdout.String(), "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != strings.Join(columns, " ") {
		t.Errorf("table header = %q, want %q", got, columns)
	}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 4 && f[3] == "True" && f[4] == "True" {
			run.buckets[f[0]+"/"+f[1]] = f[2]
		}
	}
	if len(run.buckets) == 0 {
		t.Fatalf("no Ready+Available row in the table:\n%s", &stdout)
	}
	return run
}

// startDev starts the binary in the background; stderr's lines arrive on the
// returned channel.
func startDev(t *testing.T, bin, peers string, args []string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = pkgDir
	cmd.Env = append(os.Environ(), "BUCKETKEEPER_PEERS_BIN="+peers)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			t.Log(sc.Text())
			lines <- sc.Text()
		}
	}()
	return cmd, lines
}

func waitFor(t *testing.T, lines <-chan string, re *regexp.Regexp, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("bucketkeeper-dev exited before %q", re)
			}
			if re.MatchString(l) {
				// Keep draining, so the child never blocks on a full pipe.
				go func() {
					for range lines {
					}
				}()
				return
			}
		case <-deadline:
			t.Fatalf("no %q within %s", re, timeout)
		}
	}
}

// assertKubeconfigWorks loads the kubeconfig as kubectl does and lists the
// StorageBuckets through it.
func assertKubeconfigWorks(t *testing.T, path string, want int) {
	t.Helper()
	c := kubeconfigClient(t, path)
	list := &bkv1.StorageBucketList{}
	if err := c.List(context.Background(), list); err != nil {
		t.Fatalf("list StorageBuckets with the kubeconfig: %v", err)
	}
	if len(list.Items) != want {
		t.Errorf("%d StorageBuckets through the kubeconfig, want %d", len(list.Items), want)
	}
}

// assertNoPeerLeft fails if any process still has the data directory on its
// command line (etcd runs with --data-dir=<data>/etcd). It only reads /proc.
func assertNoPeerLeft(t *testing.T, data string) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(data)) {
			t.Errorf("process %d still running: %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
	}
}

// kubeconfigClient is a client built from a kubeconfig file, as kubectl loads it.
func kubeconfigClient(t *testing.T, path string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
