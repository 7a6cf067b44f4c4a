package testenv_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestControlPlane starts etcd + kube-apiserver, talks to them, stops them and
// checks neither process nor any temp dir (ours or envtest's) is left.
func TestControlPlane(t *testing.T) {
	before := envtestDirs(t)
	begin := time.Now()
	c, err := testenv.StartControlPlane()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	t.Logf("control plane ready in %s at %s", time.Since(begin).Round(time.Millisecond), c.Config.Host)

	apiPID, etcdPID := c.APIServerPID(), c.EtcdPID()
	if apiPID == 0 || etcdPID == 0 || !alive(apiPID) || !alive(etcdPID) {
		t.Fatalf("kube-apiserver PID %d / etcd PID %d not running", apiPID, etcdPID)
	}
	assertLoopbackOnly(t, apiPID)
	assertLoopbackOnly(t, etcdPID)

	cl, err := client.New(c.Config, client.Options{Scheme: c.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var nss corev1.NamespaceList
	if err := cl.List(ctx, &nss); err != nil {
		t.Fatalf("list namespaces: %v", err)
	}
	var names []string
	for _, ns := range nss.Items {
		names = append(names, ns.Name)
	}
	if !contains(names, "default") {
		t.Fatalf("namespace default missing: %v", names)
	}

	if err := c.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	for _, pid := range []int{apiPID, etcdPID} {
		if alive(pid) {
			t.Errorf("PID %d still alive after Stop", pid)
		}
	}
	if _, err := os.Stat(c.Dir()); !os.IsNotExist(err) {
		t.Errorf("control plane dir %s still exists after Stop (%v)", c.Dir(), err)
	}
	after := envtestDirs(t)
	for d := range after {
		if !before[d] {
			t.Errorf("temp dir %s left behind", d)
		}
	}
}

// envtestDirs lists the temp dirs envtest itself would create if the harness did
// not place etcd and the apiserver in its own directory.
func envtestDirs(t *testing.T) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "k8s_test_framework_") || strings.HasPrefix(e.Name(), "envtest-") {
			m[e.Name()] = true
		}
	}
	return m
}
