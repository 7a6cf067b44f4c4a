package manifests

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestManagerRunsWithManifestRBAC runs the real manager binary with config/default's
// args as the ServiceAccount config/default creates, holding only the RBAC it grants:
// the manager must win the leader Lease, sync every informer without a "forbidden",
// and serve metrics over HTTPS only to a caller bound to bucketkeeper-metrics-reader
// (which takes the TokenReview and SubjectAccessReview rights of bucketkeeper-metrics-auth).
func TestManagerRunsWithManifestRBAC(t *testing.T) {
	bin := managerBinary(t)
	cp := testenv.NewControlPlane(t)
	c, err := client.New(cp.Config, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	objs := renderKustomize(t)
	var deployment *unstructured.Unstructured
	for _, o := range objs { // Namespace and CRDs first: the rest depends on them.
		if o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition" {
			applyForReal(ctx, t, c, o)
		}
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "CustomResourceDefinition":
		case "Deployment":
			deployment = o
		default:
			applyForReal(ctx, t, c, o)
		}
	}
	_, container := manager(t, []*unstructured.Unstructured{deployment})
	saName, _, _ := unstructured.NestedString(deployment.Object, "spec", "template", "spec", "serviceAccountName")

	token := func(sa string) string {
		t.Helper()
		tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo[int64](3600)}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token for %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cp.Config.Host, CertificateAuthorityData: cp.Config.CAData}
	kc.AuthInfos["manager"] = &clientcmdapi.AuthInfo{Token: token(saName)}
	kc.Contexts["manager"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "manager"}
	kc.CurrentContext = "manager"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}

	// The Deployment's args, on free loopback ports, out of cluster.
	addrs, err := testenv.FreeAddrs(2)
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr, healthAddr := addrs[0], addrs[1]
	args := []string{"--kubeconfig=" + kubeconfig, "--leader-election-namespace=" + namespace}
	for _, a := range container.Args {
		switch {
		case strings.HasPrefix(a, "--metrics-bind-address="):
			a = "--metrics-bind-address=" + metricsAddr
		case strings.HasPrefix(a, "--health-probe-bind-address="):
			a = "--health-probe-bind-address=" + healthAddr
		}
		args = append(args, a)
	}
	logs := startManager(t, bin, args)

	// Both controllers start their workers only once their informers synced, which
	// needs every list and watch the ClusterRole grants; leadership comes first.
	waitFor(t, 90*time.Second, "both controllers' workers to start", logs, func() bool {
		return strings.Count(logs.String(), "Starting workers") >= 2
	})

	// Metrics: HTTPS, and only for callers allowed to GET /metrics. The metrics server
	// starts alongside the controllers (after making its self-signed certificate), so
	// the workers starting says nothing about it listening: its own log line does.
	waitForMetricsServer(t, logs)
	for _, sa := range []string{"scraper", "stranger"} {
		if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: namespace}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "bucketkeeper-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: namespace}},
	}); err != nil {
		t.Fatal(err)
	}
	url := "https://" + metricsAddr + "/metrics"
	for _, tc := range []struct {
		who, token string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a ServiceAccount without bucketkeeper-metrics-reader", token("stranger"), http.StatusForbidden},
		{"a ServiceAccount bound to bucketkeeper-metrics-reader", token("scraper"), http.StatusOK},
	} {
		status, body := get(t, url, tc.token)
		if status != tc.want {
			t.Errorf("GET %s as %s: %d, want %d\n%s\nmanager log:\n%s", url, tc.who, status, tc.want, body, logTail(logs))
		} else if status == http.StatusOK && !strings.Contains(body, "controller_runtime_") {
			t.Errorf("GET %s: no controller-runtime metrics in\n%s", url, body)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// waitForMetricsServer waits for controller-runtime's log line that its metrics
// server is listening.
func waitForMetricsServer(t *testing.T, logs *testenv.LogBuffer) {
	t.Helper()
	waitFor(t, 90*time.Second, "the metrics server to listen", logs, func() bool {
		return strings.Contains(logs.String(), "Serving metrics server")
	})
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// startManager runs the manager until the test ends; it dies with the test binary.
func startManager(t *testing.T, bin string, args []string) *testenv.LogBuffer {
	t.Helper()
	logs := &testenv.LogBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	go func() {
		<-done
		if cmd.ProcessState != nil && !cmd.ProcessState.Success() && t.Context().Err() == nil {
			fmt.Fprintf(logs, "\n[manager exited: %v]\n", cmd.ProcessState)
		}
	}()
	return logs
}

// waitFor polls cond, failing at once when the manager exits or is refused a request
// (a "forbidden" in its log: the manifests' RBAC lacks a rule).
func waitFor(t *testing.T, timeout time.Duration, what string, logs *testenv.LogBuffer, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		l := logs.String()
		switch {
		case strings.Contains(l, "forbidden"):
			t.Fatalf("the manager was refused a request with the manifests' RBAC while waiting for %s:\n%s", what, logTail(logs))
		case strings.Contains(l, "[manager exited"), time.Now().After(deadline):
			t.Fatalf("gave up waiting for %s; manager log:\n%s", what, logTail(logs))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logTail is the manager's log without stack traces, at most its last 30 lines.
func logTail(logs *testenv.LogBuffer) string {
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if i := strings.Index(l, `,"stacktrace":`); i >= 0 {
			l = l[:i] + "}"
		}
		lines = append(lines, l)
	}
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The metrics certificate is self-signed, as in a cluster without cert-manager.
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed test server
	}}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	return resp.StatusCode, body.String()
}
