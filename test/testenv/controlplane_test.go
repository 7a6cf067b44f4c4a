package testenv_test

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestControlPlane starts etcd + kube-apiserver, talks to them, stops them and
// checks neither process nor any temp dir (ours or envtest's) is left.
func TestControlPlane(t *testing.T) {
	begin := time.Now()
	c, err := testenv.StartControlPlane()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	dirs := c.TempDirs()
	if len(dirs) < 2 {
		t.Fatalf("TempDirs = %v, want ours and envtest's webhook cert dir", dirs)
	}
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
	// Other test packages run in parallel and make their own envtest dirs, so check
	// exactly the ones this control plane made rather than scanning /tmp.
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("temp dir %s still exists after Stop (%v)", d, err)
		}
	}
}

// TestControlPlaneEtcdDataDir: objects written to a control plane started on an
// EtcdDataDir are there again after a restart on the same directory, Stop leaves
// that directory (and removes only the temp dirs), and a fresh CA each start does
// not get in the way.
func TestControlPlaneEtcdDataDir(t *testing.T) {
	data := t.TempDir()
	// Each API call has a deadline of its own: a start on a loaded machine may take
	// minutes, and is not what the deadline is about.
	call := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		return ctx
	}
	start := func() (*testenv.ControlPlane, client.Client) {
		t.Helper()
		c, err := testenv.StartControlPlaneWith(testenv.ControlPlaneOptions{EtcdDataDir: data})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop() })
		cl, err := client.New(c.Config, client.Options{Scheme: c.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c, cl
	}

	first, cl := start()
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name, cm.Data = "default", "survivor", map[string]string{"k": "v"}
	if err := cl.Create(call(), cm); err != nil {
		t.Fatal(err)
	}
	dirs := first.TempDirs()
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("temp dir %s still exists after Stop (%v)", d, err)
		}
	}
	if entries, err := os.ReadDir(data); err != nil || len(entries) == 0 {
		t.Fatalf("EtcdDataDir %s empty or gone after Stop: %v", data, err)
	}

	_, cl = start()
	got := &corev1.ConfigMap{}
	if err := cl.Get(call(), client.ObjectKeyFromObject(cm), got); err != nil || got.Data["k"] != "v" {
		t.Fatalf("ConfigMap after restart: %v %v", got.Data, err)
	}
}
