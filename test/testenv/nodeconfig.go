package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// writeConfigs writes the node's configuration files: containerd's, the CNI network's,
// the kubelet's and kube-proxy's.
func (n *Node) writeConfigs(kubeconfig string) error {
	d := func(parts ...string) string { return filepath.Join(append([]string{n.dir}, parts...)...) }
	r := func(parts ...string) string { return filepath.Join(append([]string{n.root}, parts...)...) }
	files := map[string]string{
		// containerd 1.6 (Debian stable), CRI with runc and the CNI bridge; cgroupfs, as
		// the kubelet's driver; restrict_oom_score_adj because a container without
		// CAP_SYS_RESOURCE (CI's may be one) fails every sandbox otherwise.
		d("containerd.toml"): fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, d("containerd", "root"), d("containerd", "state"), n.socket(), n.socket()+".ttrpc", PauseImage,
			r("usr/sbin/runc"), r("usr/lib/cni"), d("cni")),
		d("cni", "10-bridge.conflist"): fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "bucketkeeper-test",
  "plugins": [{
    "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]],
             "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
`, d("cni", "ipam"), podCIDR, nodeIP),
		d("resolv.conf"): "",
		// Eviction thresholds are off: the machine's disk is not the test's to judge.
		d("kubelet.yaml"): fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /%s
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
resolvConf: %q
evictionHard: {memory.available: "0%%", nodefs.available: "0%%", nodefs.inodesFree: "0%%", imagefs.available: "0%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
`, filepath.Base(n.dir), n.socket(), d("resolv.conf")),
		// No conntrack tuning: nf_conntrack_max is machine-wide.
		d("kube-proxy.yaml"): fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: %s
clusterCIDR: %s
clientConnection: {kubeconfig: %q}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, NodeName, podCIDR, kubeconfig),
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(strings.TrimLeft(content, "\n")), 0o600); err != nil {
			return err
		}
	}
	return nil
}
