package localpeers

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControlPlane is a real etcd + kube-apiserver started through controller-runtime
// envtest, with the project's CRDs installed.
//
// etcd's data and the apiserver's certificates live in a bucketkeeper-test-<pid>-*
// directory instead of envtest's own k8s_test_framework_* ones, so the stale-dir
// sweep also covers a control plane whose test binary was killed. The processes
// themselves die with the test binary through the peers' lifeline wrappers.
type ControlPlane struct {
	Config *rest.Config
	// Scheme holds the client-go types; add the project's API types to it.
	Scheme *runtime.Scheme

	mu           sync.Mutex
	env          *envtest.Environment
	dir          string
	apiServerPID int
	etcdPID      int
	stopped      bool
}

// ControlPlaneOptions adjust StartControlPlaneWith. The zero value is what
// StartControlPlane does: everything in a fresh temp dir that Stop removes.
type ControlPlaneOptions struct {
	// EtcdDataDir, when set, holds etcd's data instead of the temp dir, and Stop
	// leaves it in place: a control plane started later on the same directory finds
	// the same objects (the dev binary's --data-dir). Only etcd's data moves there.
	// The apiserver's certificates and both logs stay in the temp dir, because
	// envtest mints a new CA, serving certificate and admin user on every start and,
	// finding an old apiserver.crt, would neither replace it nor learn its CA.
	EtcdDataDir string
	// BeforeBuild, if set, is called with the peers hack/peers/build.sh is about to
	// build because they are not cached yet, before the build starts: a cold build
	// takes minutes, and a caller can say so instead of appearing to hang.
	BeforeBuild func(missing []string)
	// Issuer, when set, is the ServiceAccount token issuer: the API server signs tokens
	// for its URL and advertises its key set there, and the issuer serves this control
	// plane's discovery document and key set once it is up (test/testenv's Issuer).
	Issuer TokenIssuer
}

// TokenIssuer is a ServiceAccount token issuer a control plane can be started with.
type TokenIssuer interface {
	// APIServerFlags are the kube-apiserver flags that make it sign tokens for the
	// issuer, with key files written under dir.
	APIServerFlags(dir string) (map[string]string, error)
	// ServeFrom starts serving the discovery document and key set of the API server
	// cfg reaches.
	ServeFrom(cfg *rest.Config) error
}

// StartControlPlane starts etcd and kube-apiserver from BinDir (building them
// if needed) and installs the CRDs in <root>/config/crd/bases. kubectl is not
// needed.
func StartControlPlane() (*ControlPlane, error) {
	return StartControlPlaneWith(ControlPlaneOptions{})
}

// StartControlPlaneWith is StartControlPlane with options.
func StartControlPlaneWith(opts ControlPlaneOptions) (*ControlPlane, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	if opts.BeforeBuild != nil {
		if missing := Missing("etcd", "kube-apiserver"); len(missing) > 0 {
			opts.BeforeBuild(missing)
		}
	}
	bin, err := BinDir("etcd", "kube-apiserver")
	if err != nil {
		return nil, err
	}
	dir, err := NewTempDir()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	etcdDir, certDir := filepath.Join(dir, "etcd"), filepath.Join(dir, "apiserver")
	if opts.EtcdDataDir != "" {
		if etcdDir, err = filepath.Abs(opts.EtcdDataDir); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	for _, d := range []string{etcdDir, certDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	etcdLog, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	defer etcdLog.Close() // the children hold their own descriptors
	apiLog, err := os.Create(filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	defer apiLog.Close()

	env := &envtest.Environment{
		// Explicit paths: KUBEBUILDER_ASSETS / TEST_ASSET_* in the environment
		// would otherwise win over BinaryAssetsDirectory.
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
		// A 2-core machine running several suites needs more than the 20s default.
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{
		Path: filepath.Join(bin, "etcd"), DataDir: etcdDir, Out: etcdLog, Err: etcdLog,
	}
	api := env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(bin, "kube-apiserver")
	api.CertDir = certDir
	api.Out, api.Err = apiLog, apiLog
	// API priority and fairness off: nothing here is about it, and its configuration
	// controller writes and keeps syncing a dozen FlowSchemas and PriorityLevels at
	// every start: a quarter of what a start costs (etcd included, about 5.2 against 3.7
	// CPU seconds to ready), and make test starts over a dozen control planes.
	api.Configure().Set("enable-priority-and-fairness", "false")
	env.ControlPlane.KubectlPath = filepath.Join(bin, "kubectl") // never run
	if opts.Issuer != nil {
		flags, err := opts.Issuer.APIServerFlags(dir)
		if err != nil {
			_ = RemoveTempDir(dir)
			return nil, err
		}
		for flag, value := range flags {
			api.Configure().Set(flag, value)
		}
	}

	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		_ = RemoveTempDir(dir)
		return nil, fmt.Errorf("localpeers: start control plane: %w\n--- etcd.log ---\n%s\n--- kube-apiserver.log ---\n%s",
			err, LogTail(etcdLog.Name()), LogTail(apiLog.Name()))
	}
	c := &ControlPlane{Config: cfg, Scheme: scheme, env: env, dir: dir}
	if opts.Issuer != nil {
		if err := opts.Issuer.ServeFrom(cfg); err != nil {
			return nil, errors.Join(err, env.Stop(), RemoveTempDir(dir))
		}
	}
	c.apiServerPID = childWithArg("--cert-dir=" + certDir)
	c.etcdPID = childWithArg("--data-dir=" + etcdDir)
	return c, nil
}

// Stop stops kube-apiserver and etcd and removes their directories. It is idempotent.
func (c *ControlPlane) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	return errors.Join(c.env.Stop(), RemoveTempDir(c.dir))
}

// APIServerPID returns the kube-apiserver's process ID (0 if it was not found).
func (c *ControlPlane) APIServerPID() int { return c.apiServerPID }

// EtcdPID returns etcd's process ID (0 if it was not found).
func (c *ControlPlane) EtcdPID() int { return c.etcdPID }

// Dir returns the directory holding etcd's data (unless EtcdDataDir placed it
// elsewhere), the apiserver's certificates and both logs; Stop removes it.
func (c *ControlPlane) Dir() string { return c.dir }

// TempDirs lists every directory this control plane created, ours and the one envtest
// makes for webhook certificates on its own; Stop removes them all.
func (c *ControlPlane) TempDirs() []string {
	dirs := []string{c.dir}
	if d := c.env.WebhookInstallOptions.LocalServingCertDir; d != "" {
		dirs = append(dirs, d)
	}
	return dirs
}

// procStat returns the fields of /proc/PID/stat after the parenthesised command name
// (state, ppid, ...), or nil when the process is gone.
func procStat(pid int) []string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(stat[i+1:]))
}

// ProcessExited reports whether pid has exited (a zombie nobody reaped yet counts).
func ProcessExited(pid int) bool {
	fields := procStat(pid)
	return len(fields) == 0 || fields[0] == "Z"
}

// childWithArg finds the child of this process whose command line contains arg.
// envtest keeps its process handles private; the directories we gave it are
// unique, so they identify our own children.
func childWithArg(arg string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fields := procStat(pid)
		if len(fields) < 2 || fields[1] != self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(cmdline), "\x00") {
			if a == arg {
				return pid
			}
		}
	}
	return 0
}

// WriteKubeconfig writes the control plane's admin credentials (its client
// certificate) as a kubeconfig file at path: what a process of the operator's binary
// started by a test reads (--kubeconfig).
func (c *ControlPlane) WriteKubeconfig(path string) error {
	server := c.Config.Host
	if !strings.HasPrefix(server, "https://") && !strings.HasPrefix(server, "http://") {
		server = "https://" + server
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: c.Config.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.Config.CertData, ClientKeyData: c.Config.KeyData, Token: c.Config.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}
