package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/bucketkeeper/bucketkeeper/internal/localpeers"
)

// Node is the test cluster's one node: containerd (with runc and the CNI bridge
// plugin), the kubelet and kube-proxy, all in namespaces of the node's own, made by one
// `unshare` whose child, the pause binary, is the init of the node's PID namespace:
//   - network: a bridge (cni0, nodeIP) for the Pods and kube-proxy's rules; loopback
//     services of the machine (the API server, stores) are forwarded into it;
//   - mount: private tmpfs on /run and the test's own directories on /var/lib and
//     /var/log, so nothing the node mounts or writes at fixed paths (pod network
//     namespaces, container logs, CNI state) reaches the machine; and the kernel
//     settings the kubelet would set (vm.overcommit_memory, kernel.panic...) are files
//     of the test's own bound over /proc/sys;
//   - PID: killing the init kills every process of the node, the containerd shims and
//     containers included, and the mounts go with the last of them.
//
// The Pods' cgroups sit below a cgroup root named after the cluster's directory;
// stop removes them, and so does the stale-directory sweep after a killed run.
type Node struct {
	dir, root string // the cluster's directory; the Debian root with containerd, runc, CNI, nft
	holder    *Process
	initPID   int
	netns     *os.File
	cgroups   []string
	processes []*Process
	forwards  []*forwarder
}

// sysctlsOfTheKubelet are the kernel settings the kubelet writes at start: machine-wide
// knobs, each replaced by a file in the node's mount namespace.
var sysctlsOfTheKubelet = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic",
	"kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// startNodeNamespaces makes the node's namespaces, its bridge and its cgroup root.
func startNodeNamespaces(dir, bin string) (*Node, error) {
	n := &Node{dir: dir, root: filepath.Join(bin, "node-root")}
	repo, err := RepoRoot()
	if err != nil {
		return n, err
	}
	pause := filepath.Join(dir, "pause")
	build := exec.Command("go", "build", "-o", pause, "./test/testenv/pause")
	build.Dir, build.Env = repo, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return n, fmt.Errorf("testenv: build pause: %v\n%s", err, out)
	}
	for _, d := range []string{"var-lib", "var-log", "sysctl", "cni", "kubelet", "containerd"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return n, err
		}
	}
	if err := n.makeCgroupRoot(); err != nil {
		return n, err
	}
	script := []string{"set -eu",
		"mount -t tmpfs tmpfs /run", "mkdir -p /run/netns",
		"mount --bind " + filepath.Join(dir, "var-lib") + " /var/lib",
		"mount --bind " + filepath.Join(dir, "var-log") + " /var/log"}
	for _, s := range sysctlsOfTheKubelet {
		f := filepath.Join(dir, "sysctl", strings.ReplaceAll(s, "/", "."))
		script = append(script, fmt.Sprintf("cat /proc/sys/%s > %s", s, f), fmt.Sprintf("mount --bind %s /proc/sys/%s", f, s))
	}
	script = append(script,
		"ip link set lo up",
		"ip link add cni0 type bridge", "ip addr add "+nodeIP+"/24 dev cni0", "ip link set cni0 up",
		// Cluster IPs are routed to the bridge, so that connections from the node itself
		// (the test's, see Cluster.DialContext) reach kube-proxy's rules.
		"ip route add "+serviceCIDR+" dev cni0",
		"echo 1 > /proc/sys/net/ipv4/ip_forward",
		"touch "+filepath.Join(dir, "node-init.ready"),
		"exec "+pause)
	scriptPath := filepath.Join(dir, "node-init.sh")
	if err := os.WriteFile(scriptPath, []byte(strings.Join(script, "\n")+"\n"), 0o700); err != nil {
		return n, err
	}
	n.holder, err = StartProcess("/usr/bin/unshare", []string{"--net", "--mount", "--pid", "--fork", "--kill-child",
		"--mount-proc", "--propagation", "private", "/bin/sh", scriptPath}, childEnv(dir), dir, filepath.Join(dir, "node-init.log"))
	if err != nil {
		return n, fmt.Errorf("testenv: start the node's namespaces: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "node-init.ready")); err == nil {
			break
		}
		if n.holder.Exited() || time.Now().After(deadline) {
			return n, fmt.Errorf("testenv: the node's namespaces did not come up:\n%s", localpeers.LogTail(filepath.Join(dir, "node-init.log")))
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.holder.Serving()
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", n.holder.PID(), n.holder.PID()))
	if err != nil {
		return n, err
	}
	if n.initPID, err = strconv.Atoi(strings.TrimSpace(string(children))); err != nil {
		return n, fmt.Errorf("testenv: the node's init: %q: %w", children, err)
	}
	n.netns, err = os.Open(fmt.Sprintf("/proc/%d/ns/net", n.initPID))
	return n, err
}

// makeCgroupRoot creates the node's cgroup root in every cgroup hierarchy mounted here.
func (n *Node) makeCgroupRoot() error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	name := filepath.Base(n.dir)
	for _, m := range mounts {
		d := filepath.Join(m, name)
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			return err
		}
		n.cgroups = append(n.cgroups, d)
		if err := localpeers.AddCleanupPaths(n.dir, d); err != nil {
			return err
		}
		if filepath.Base(m) == "cpuset" { // a v1 cpuset cgroup starts with no CPUs or memory nodes
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(m, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// cgroupMounts lists the mount points of the cgroup (v1) and cgroup2 hierarchies.
func cgroupMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options ... - fstype source superoptions
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && (fields[i+1] == "cgroup" || fields[i+1] == "cgroup2") && len(fields) > 4 {
				mounts = append(mounts, fields[4])
			}
		}
	}
	return mounts, sc.Err()
}

// forward makes listenAddr inside the node's network lead to target on loopback.
func (n *Node) forward(listenAddr, target string) error {
	f, err := forwardInto(n.netns, listenAddr, target)
	if err != nil {
		return fmt.Errorf("testenv: forward %s into the node: %w", target, err)
	}
	n.forwards = append(n.forwards, f)
	return nil
}

// dial dials addr from inside the node's network.
func (n *Node) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialInNetNS(ctx, n.netns, network, addr)
}

// startIn starts a node process inside the node's namespaces.
func (n *Node) startIn(name, bin string, args ...string) (*Process, error) {
	env := childEnv(filepath.Join(n.dir, "var-lib"),
		// wrap first: its nft runs the root's nft with the root's libraries.
		"PATH="+strings.Join([]string{filepath.Join(n.root, "wrap"), filepath.Join(n.root, "usr/bin"),
			filepath.Join(n.root, "usr/sbin"), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, ":"))
	nsArgs := append([]string{"--target", strconv.Itoa(n.initPID), "--mount", "--net", "--pid", "--wd=" + n.dir, "--", bin}, args...)
	p, err := StartProcess("/usr/bin/nsenter", nsArgs, env, n.dir, filepath.Join(n.dir, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("testenv: start %s: %w", name, err)
	}
	n.processes = append(n.processes, p)
	return p, nil
}

func (n *Node) socket() string { return filepath.Join(n.dir, "containerd", "containerd.sock") }

// start starts containerd, imports the pause image, then starts the kubelet and
// kube-proxy.
func (n *Node) start(kubeNode, kubeconfig string) error {
	if err := n.writeConfigs(kubeconfig); err != nil {
		return err
	}
	containerd, err := n.startIn("containerd", filepath.Join(n.root, "usr/bin/containerd"),
		"--config", filepath.Join(n.dir, "containerd.toml"))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if c, err := net.Dial("unix", n.socket()); err == nil {
			c.Close()
			break
		}
		if containerd.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("testenv: containerd did not start:\n%s", localpeers.LogTail(filepath.Join(n.dir, "containerd.log")))
		}
		time.Sleep(100 * time.Millisecond)
	}
	containerd.Serving()
	if err := n.importPause(); err != nil {
		return err
	}
	kubelet, err := n.startIn("kubelet", kubeNode, "kubelet",
		"--config="+filepath.Join(n.dir, "kubelet.yaml"), "--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(n.dir, "kubelet"), "--hostname-override="+NodeName, "--node-ip="+nodeIP)
	if err != nil {
		return err
	}
	kubelet.Serving()
	proxy, err := n.startIn("kube-proxy", kubeNode, "kube-proxy", "--config="+filepath.Join(n.dir, "kube-proxy.yaml"))
	if err != nil {
		return err
	}
	proxy.Serving()
	return nil
}

// waitReady waits until the node reports Ready and kube-proxy is healthy (its health
// endpoint answers 200 only once it has programmed the Services).
func (n *Node) waitReady(cfg *rest.Config, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	proxyHealth := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: n.dial}}
	for {
		for _, p := range n.processes {
			if p.Exited() {
				return errors.New("testenv: a node process exited during start")
			}
		}
		if err = nodeReady(ctx, cs); err == nil {
			var resp *http.Response
			if resp, err = proxyHealth.Get("http://127.0.0.1:10256/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
				err = fmt.Errorf("kube-proxy health: %s", resp.Status)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: node not ready after %s: %v", timeout, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// nodeReady returns nil once the node's Ready condition is True.
func nodeReady(ctx context.Context, cs kubernetes.Interface) error {
	node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("node %s not Ready: %v", NodeName, node.Status.Conditions)
}

// importPause builds the pause image (containerd's sandbox image) and imports it.
func (n *Node) importPause() error {
	tarball := filepath.Join(n.dir, "pause.tar")
	if err := WriteImageArchive(tarball, PauseImage, ImageConfig{Entrypoint: []string{"/pause"}, User: "65535:65535"},
		ImageFile{Path: "/pause", Source: filepath.Join(n.dir, "pause"), Mode: 0o755}); err != nil {
		return err
	}
	return n.importImage(tarball)
}

// importImage imports an image archive (docker-archive or OCI) into containerd's
// namespace for Kubernetes and fails unless containerd then lists every image the
// archive names.
func (n *Node) importImage(tarball string) error {
	ctr := filepath.Join(n.root, "usr/bin/ctr")
	cmd := exec.Command(ctr, "--address", n.socket(), "--namespace", "k8s.io", "images", "import", tarball)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("testenv: ctr images import %s: %v\n%s", tarball, err, out)
	}
	names, err := archiveRefs(tarball)
	if err != nil {
		return err
	}
	list, err := exec.Command(ctr, "--address", n.socket(), "--namespace", "k8s.io", "images", "list", "--quiet").Output()
	if err != nil {
		return fmt.Errorf("testenv: ctr images list: %w", err)
	}
	for _, name := range names {
		if !strings.Contains("\n"+string(list), "\n"+name+"\n") {
			return fmt.Errorf("testenv: containerd did not keep image %s from %s (ctr said: %s)", name, tarball, out)
		}
	}
	return nil
}

// stop ends every node process by killing the init of the node's PID namespace, then
// removes the node's cgroups and closes its forwarders.
func (n *Node) stop() error {
	var errs []error
	for i := len(n.processes) - 1; i >= 0; i-- {
		n.processes[i].Abort()
	}
	if n.holder != nil {
		n.holder.Abort()
	}
	if n.initPID > 0 { // the kernel kills the namespace's processes once its init is gone
		deadline := time.Now().Add(30 * time.Second)
		for !localpeers.ProcessExited(n.initPID) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, f := range n.forwards {
		errs = append(errs, f.Close())
	}
	if n.netns != nil {
		errs = append(errs, n.netns.Close())
	}
	for _, d := range n.cgroups {
		errs = append(errs, localpeers.RemoveCgroupTree(d))
	}
	return errors.Join(errs...)
}
