package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bucketkeeper/bucketkeeper/internal/localpeers"
)

// The test cluster's fixed addresses. They exist only inside the node's own network
// namespace (and in the API server's records), so they collide with nothing.
const (
	// nodeIP is the node's address: its bridge, the Pods' gateway, where the API server
	// and the stores are forwarded for Pods.
	nodeIP = "10.244.0.1"
	// podCIDR holds the Pods' addresses, on the bridge.
	podCIDR = "10.244.0.0/24"
	// serviceCIDR holds the Services' cluster IPs; the first is the kubernetes Service.
	serviceCIDR = "10.96.0.0/24"
	serviceIP   = "10.96.0.1"
	// NodeName is the one node's name.
	NodeName = "bucketkeeper-test-node"
)

// Cluster is a real single-node Kubernetes cluster: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler on this machine's loopback, and a node
// (containerd, runc, the kubelet, kube-proxy) in namespaces of its own (see Node). Pods
// run for real, from images imported with ImportImage; nothing is pulled.
type Cluster struct {
	// Config is an admin (system:masters) client configuration on 127.0.0.1.
	Config *rest.Config
	Scheme *runtime.Scheme
	// Kubeconfig is the same admin access as a kubeconfig file (for Helm and the like).
	Kubeconfig string

	dir       string
	certs     clusterCerts
	apiPort   int
	processes []*Process // control plane, in start order
	node      *Node
	stopped   bool
}

// ClusterOptions adjust StartClusterWith; the zero value is StartCluster.
type ClusterOptions struct {
	// Issuer, when set, is the ServiceAccount token issuer, as for a control plane
	// (ControlPlaneOptions.Issuer); otherwise tokens are issued for
	// https://kubernetes.default.svc.
	Issuer *Issuer
}

// StartCluster starts the control plane and the node and waits until the node is
// Ready. Stop undoes everything, also after a failed start.
func StartCluster() (*Cluster, error) { return StartClusterWith(ClusterOptions{}) }

// StartClusterWith is StartCluster with options.
func StartClusterWith(opts ClusterOptions) (c *Cluster, err error) {
	bin, err := localpeers.BinDir("etcd", "kube-apiserver", "kube-node", "node")
	if err != nil {
		return nil, err
	}
	dir, err := localpeers.NewTempDir()
	if err != nil {
		return nil, err
	}
	c = &Cluster{dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	if c.Scheme = runtime.NewScheme(); clientgoscheme.AddToScheme(c.Scheme) != nil {
		return c, errors.New("testenv: client-go scheme")
	}
	if c.certs, err = writeClusterCerts(dir, net.ParseIP(serviceIP), net.ParseIP(nodeIP)); err != nil {
		return c, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return c, err
	}
	etcdPort, peerPort := ports[0], ports[1]
	c.apiPort = ports[2]

	// The node's namespaces first: the node's address must exist before anything is
	// forwarded to it, and a machine that cannot make them fails the start early.
	if c.node, err = startNodeNamespaces(dir, bin); err != nil {
		return c, err
	}
	saFlags := []string{"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + c.certs.saPublicKey(), "--service-account-signing-key-file=" + c.certs.saKey()}
	saKey := c.certs.saKey()
	if opts.Issuer != nil {
		flags, err := opts.Issuer.APIServerFlags(dir)
		if err != nil {
			return c, err
		}
		saFlags, saKey = nil, flags["service-account-signing-key-file"]
		for flag, value := range flags {
			saFlags = append(saFlags, "--"+flag+"="+value)
		}
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	if err := c.start(filepath.Join(bin, "etcd"), "etcd",
		"--data-dir="+filepath.Join(dir, "etcd"), "--unsafe-no-fsync",
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL); err != nil {
		return c, err
	}
	if err := c.start(filepath.Join(bin, "kube-apiserver"), "kube-apiserver", append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.apiPort),
		// Pods find the API server through the kubernetes Service, whose endpoint is
		// this address: kube-proxy sends them to the node's bridge, from where the
		// harness forwards to 127.0.0.1.
		"--advertise-address=" + nodeIP, "--service-cluster-ip-range=" + serviceCIDR,
		"--cert-dir=" + filepath.Join(dir, "apiserver"),
		"--client-ca-file=" + c.certs.caFile(),
		"--tls-cert-file=" + c.certs.servingCert(), "--tls-private-key-file=" + c.certs.servingKey(),
		"--authorization-mode=Node,RBAC"}, saFlags...)...); err != nil {
		return c, err
	}
	c.Config = &rest.Config{
		Host: "https://127.0.0.1:" + strconv.Itoa(c.apiPort),
		TLSClientConfig: rest.TLSClientConfig{
			CAFile: c.certs.caFile(), CertFile: c.certs.adminCert(), KeyFile: c.certs.adminKey(),
		},
		QPS: 50, Burst: 100,
	}
	if err := c.waitReady(90 * time.Second); err != nil {
		return c, err
	}
	if opts.Issuer != nil {
		if err := opts.Issuer.ServeFrom(c.Config); err != nil {
			return c, err
		}
	}
	if c.Kubeconfig, err = c.writeKubeconfig("admin.kubeconfig", c.Config.Host); err != nil {
		return c, err
	}
	// The node's components reach the API server on the node's own address.
	nodeKubeconfig, err := c.writeKubeconfig("node.kubeconfig", "https://"+net.JoinHostPort(nodeIP, strconv.Itoa(c.apiPort)))
	if err != nil {
		return c, err
	}
	if err := c.node.forward(nodeIP+":"+strconv.Itoa(c.apiPort), "127.0.0.1:"+strconv.Itoa(c.apiPort)); err != nil {
		return c, err
	}
	kubeNode := filepath.Join(bin, "kube-node")
	if err := c.start(kubeNode, "kube-controller-manager", "kube-controller-manager",
		"--kubeconfig="+c.Kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--root-ca-file="+c.certs.caFile(), "--service-account-private-key-file="+saKey); err != nil {
		return c, err
	}
	if err := c.start(kubeNode, "kube-scheduler", "kube-scheduler",
		"--kubeconfig="+c.Kubeconfig, "--leader-elect=false", "--secure-port=0"); err != nil {
		return c, err
	}
	if err := c.node.start(kubeNode, nodeKubeconfig); err != nil {
		return c, err
	}
	return c, c.node.waitReady(c.Config, 3*time.Minute)
}

// NewCluster is StartCluster for a test: it fails the test on error and stops the
// cluster when the test ends.
func NewCluster(tb testing.TB) *Cluster { return NewClusterWith(tb, ClusterOptions{}) }

// NewClusterWith is NewCluster with options.
func NewClusterWith(tb testing.TB, opts ClusterOptions) *Cluster {
	tb.Helper()
	c, err := StartClusterWith(opts)
	if err != nil {
		tb.Fatalf("start cluster: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("stop cluster: %v", err)
		}
	})
	return c
}

// start starts one control-plane process with its log in the cluster's directory.
func (c *Cluster) start(bin, name string, args ...string) error {
	p, err := StartProcess(bin, args, childEnv(c.dir), c.dir, filepath.Join(c.dir, name+".log"))
	if err != nil {
		return fmt.Errorf("testenv: start %s: %w", name, err)
	}
	c.processes = append(c.processes, p)
	p.Serving()
	return nil
}

// waitReady polls the API server's /readyz until it answers 200.
func (c *Cluster) waitReady(timeout time.Duration) error {
	tlsConfig, err := rest.TLSConfigFor(c.Config)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: 5 * time.Second}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		for _, p := range c.processes {
			if p.Exited() {
				return fmt.Errorf("testenv: a control-plane process exited during start\n%s", c.Logs())
			}
		}
		resp, err := hc.Get(c.Config.Host + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("readyz: %s", resp.Status)
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("testenv: API server not ready after %s: %v\n%s", timeout, last, c.Logs())
}

// writeKubeconfig writes the admin credentials for server into the cluster's directory.
func (c *Cluster) writeKubeconfig(name, server string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: c.certs.caFile()}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificate: c.certs.adminCert(), ClientKey: c.certs.adminKey()}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	cfg.CurrentContext = "test"
	path := filepath.Join(c.dir, name)
	return path, clientcmd.WriteToFile(*cfg, path)
}

// Expose makes a loopback address of this machine (an S3 store) reachable from Pods,
// and returns the address they use for it: the node's address, same port.
func (c *Cluster) Expose(loopbackAddr string) (string, error) {
	_, port, err := net.SplitHostPort(loopbackAddr)
	if err != nil {
		return "", err
	}
	addr := net.JoinHostPort(nodeIP, port)
	return addr, c.node.forward(addr, loopbackAddr)
}

// DialContext dials addr from inside the node's network, where cluster IPs and Pod IPs
// are routed: the test's way to a Service, as a Pod on the node would reach it.
func (c *Cluster) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return c.node.dial(ctx, network, addr)
}

// HTTPClient is an HTTP client whose connections start inside the node's network
// (see DialContext), verifying TLS against roots (nil: no TLS verification, for a
// self-signed metrics server).
func (c *Cluster) HTTPClient(roots *x509.CertPool) *http.Client {
	tlsConfig := &tls.Config{RootCAs: roots, InsecureSkipVerify: roots == nil} //nolint:gosec // see above
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: c.DialContext, TLSClientConfig: tlsConfig, DisableKeepAlives: true,
	}}
}

// ImportImage imports an image archive (a docker-archive tarball, or an OCI archive
// such as the release's) into the node's containerd, where the kubelet finds it under
// the names the archive gives it.
func (c *Cluster) ImportImage(tarball string) error { return c.node.importImage(tarball) }

// Logs returns the tail of every cluster process's log, for a failure message.
func (c *Cluster) Logs() string {
	var s string
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
		"containerd", "kubelet", "kube-proxy", "node-init"} {
		path := filepath.Join(c.dir, name+".log")
		if _, err := os.Stat(path); err == nil {
			s += fmt.Sprintf("--- %s ---\n%s\n", name+".log", localpeers.LogTail(path))
		}
	}
	return s
}

// Stop stops the node (every process, mount and cgroup it made), then the control
// plane, and removes the cluster's directory. It is idempotent.
func (c *Cluster) Stop() error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	var errs []error
	if c.node != nil {
		errs = append(errs, c.node.stop())
	}
	for i := len(c.processes) - 1; i >= 0; i-- {
		errs = append(errs, c.processes[i].Stop())
	}
	errs = append(errs, localpeers.RemoveTempDir(c.dir))
	return errors.Join(errs...)
}

// Dir is the cluster's directory: certificates, configuration, logs, and the node's
// state. Stop removes it.
func (c *Cluster) Dir() string { return c.dir }

// NodeInitPID is the PID (as this machine sees it) of the init of the node's PID
// namespace: every process of the node, containers included, dies with it.
func (c *Cluster) NodeInitPID() int { return c.node.initPID }

// NodeCgroups are the node's cgroup roots, one per cgroup hierarchy.
func (c *Cluster) NodeCgroups() []string { return c.node.cgroups }
