package manifests

import (
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// notExposed lists the manager flags the chart deliberately leaves out, with why.
// Everything else the binary defines must be reachable through values.yaml.
var notExposed = map[string]string{
	"kubeconfig":      "in a cluster the manager uses its ServiceAccount (in-cluster config)",
	"mover-namespace": "the movers run where the manager's Role and their ServiceAccount are: the release namespace, or leaderElection.namespace",
}

// fullValues sets every flag-backed value of the chart to something other than its
// default.
func fullValues() map[string]any {
	return map[string]any{
		"image": map[string]any{"repository": "registry.example.com/bk", "tag": "1.2.3"},
		"manager": map[string]any{
			"concurrency": 8, "syncInterval": "3m", "usageInterval": "7m", "statusHeartbeat": "2m",
			"s3RequestTimeout": "45s", "reconcileTimeout": "5m", "createSettleTime": "40s",
			"defaultProbeInterval": "30s", "minProbeRequestInterval": "20s", "watchNamespace": "apps",
			"watchLabelSelector": "shard in (a,b),tier!=test", "shardCount": 3, "disableAvailabilityMetric": true,
			"kubeApiQps": 7.5, "kubeApiBurst": 15, "pprofBindAddress": "127.0.0.1:6060",
			"clusterId": "prod-eu", "accessKeyGrace": "15m", "accessCollectInterval": "2m",
		},
		"mover": map[string]any{"mode": "job", "parallelism": 6, "cpu": "750m", "memory": "96Mi", "maxConcurrentMoves": 9},
		"leaderElection": map[string]any{
			"enabled": true, "namespace": "bucketkeeper-leases", "id": "shard-a.bucketkeeper.io",
			"leaseDuration": "30s", "renewDeadline": "20s", "retryPeriod": "4s",
		},
		"healthProbe": map[string]any{"bindAddress": ":9081"},
		"metrics":     map[string]any{"bindAddress": ":9443", "secure": false},
		"receiver": map[string]any{
			"enabled": true, "bindAddress": ":9090", "keysNamespace": "bucketkeeper-keys",
			"clusterWideKey": true, "existingSecret": "bucketkeeper-receiver", "secretKey": "hmac",
			"tls": map[string]any{"existingSecret": "bucketkeeper-receiver-tls"},
		},
		"logging": map[string]any{
			"level": "debug", "encoder": "console", "development": true,
			"stacktraceLevel": "panic", "timeEncoding": "rfc3339",
		},
	}
}

// fullFlags is what fullValues must render.
var fullFlags = map[string]string{
	"concurrency": "8", "sync-interval": "3m", "usage-interval": "7m", "status-heartbeat": "2m",
	"s3-request-timeout": "45s", "reconcile-timeout": "5m", "create-settle-time": "40s",
	"default-probe-interval": "30s", "min-probe-request-interval": "20s", "watch-namespace": "apps",
	"watch-label-selector": "shard in (a,b),tier!=test", "shard-count": "3", "disable-availability-metric": "true",
	"kube-api-qps": "7.5", "kube-api-burst": "15", "pprof-bind-address": "127.0.0.1:6060",
	"cluster-id": "prod-eu", "access-key-grace": "15m", "access-collect-interval": "2m",
	"mover": "job", "mover-image": "registry.example.com/bk:1.2.3", "mover-service-account": "bucketkeeper-mover",
	"mover-parallelism": "6", "mover-cpu": "750m", "mover-memory": "96Mi", "max-concurrent-moves": "9",
	"leader-elect": "true", "leader-election-namespace": "bucketkeeper-leases",
	"leader-election-id": "shard-a.bucketkeeper.io", "leader-election-lease-duration": "30s",
	"leader-election-renew-deadline": "20s", "leader-election-retry-period": "4s",
	"health-probe-bind-address": ":9081", "metrics-bind-address": ":9443", "metrics-secure": "false",
	"receiver-bind-address": ":9090", "receiver-keys-namespace": "bucketkeeper-keys",
	"receiver-cluster-wide-key": "true", "receiver-secret-file": "/etc/bucketkeeper/receiver/hmac",
	"receiver-tls-cert-file": "/etc/bucketkeeper/receiver-tls/tls.crt", "receiver-tls-key-file": "/etc/bucketkeeper/receiver-tls/tls.key",
	"zap-log-level": "debug", "zap-encoder": "console", "zap-devel": "true",
	"zap-stacktrace-level": "panic", "zap-time-encoding": "rfc3339",
}

var helpFlag = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9._-]*)`)

// binaryFlags lists the flags of the real manager binary from its -help output, so
// that the flags controller-runtime adds (zap's, --kubeconfig) count too.
func binaryFlags(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command(managerBinary(t), "-help").CombinedOutput()
	if err != nil {
		t.Fatalf("bucketkeeper -help: %v\n%s", err, out)
	}
	flags := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if len(flags) < 10 {
		t.Fatalf("found only %v in the -help output:\n%s", flags, out)
	}
	return flags
}

// TestChartExposesEveryFlag: every flag of cmd/bucketkeeper can be set through the
// chart's values, every flag the chart renders exists, and the values arrive intact.
func TestChartExposesEveryFlag(t *testing.T) {
	flags := binaryFlags(t)
	_, c := manager(t, renderChart(t, fullValues()).Objects)
	args := parseArgs(t, c.Args)
	for _, f := range sortedKeys(flags) {
		if _, skip := notExposed[f]; skip {
			continue
		}
		if _, ok := args[f]; !ok {
			t.Errorf("flag --%s of cmd/bucketkeeper is not exposed by charts/bucketkeeper: add a value "+
				"(and set it in fullValues), or list it in notExposed with the reason", f)
		}
	}
	for _, f := range sortedKeys(notExposed) {
		if !flags[f] {
			t.Errorf("notExposed lists --%s, which cmd/bucketkeeper no longer defines", f)
		}
	}
	for _, f := range sortedKeys(args) {
		if !flags[f] {
			t.Errorf("the chart passes --%s, which cmd/bucketkeeper does not define (the pod would exit)", f)
		}
	}
	if !reflect.DeepEqual(args, fullFlags) {
		t.Errorf("rendered flags:\n got %v\nwant %v", args, fullFlags)
	}
}

// TestManagerAcceptsRenderedArgs runs the real binary with the args of every
// rendering followed by -help: the flag package parses them in order and exits 0
// at -help only if each one is defined and its value parses.
func TestManagerAcceptsRenderedArgs(t *testing.T) {
	bin := managerBinary(t)
	for name, objs := range map[string][]*unstructured.Unstructured{
		"kustomize":        renderKustomize(t),
		"helm-defaults":    renderChart(t, nil).Objects,
		"helm-full-values": renderChart(t, fullValues()).Objects,
	} {
		t.Run(name, func(t *testing.T) {
			_, c := manager(t, objs)
			out, err := exec.Command(bin, append(append([]string{}, c.Args...), "-help")...).CombinedOutput()
			if err != nil {
				first, _, _ := strings.Cut(string(out), "\n")
				t.Errorf("bucketkeeper %v -help: %v: %s", c.Args, err, first)
			}
		})
	}
}

// TestChartReceiverKeys: the webhook's keys are namespaced unless the values choose the
// cluster-wide key explicitly. receiver.existingSecret alone (the chart's only key
// before namespaced keys) is refused, not silently kept as a key for every namespace,
// and so is clusterWideKey without the Secret; namespaced keys alone mount nothing.
func TestChartReceiverKeys(t *testing.T) {
	for name, c := range map[string]struct {
		receiver map[string]any
		wantErr  string
		wantArgs map[string]string
		noArgs   []string
	}{
		"existingSecret without clusterWideKey": {receiver: map[string]any{"enabled": true, "existingSecret": "hmac"},
			wantErr: "receiver.clusterWideKey=true"},
		"clusterWideKey without existingSecret": {receiver: map[string]any{"enabled": true, "clusterWideKey": true},
			wantErr: "needs receiver.existingSecret"},
		"namespaced keys only": {receiver: map[string]any{"enabled": true},
			wantArgs: map[string]string{"receiver-bind-address": ":8082"},
			noArgs:   []string{"receiver-secret-file", "receiver-cluster-wide-key", "receiver-keys-namespace"}},
		"cluster-wide key chosen": {receiver: map[string]any{"enabled": true, "clusterWideKey": true, "existingSecret": "hmac"},
			wantArgs: map[string]string{"receiver-cluster-wide-key": "true", "receiver-secret-file": "/etc/bucketkeeper/receiver/secret"}},
		"disabled, with a stale existingSecret": {receiver: map[string]any{"enabled": false, "existingSecret": "hmac"},
			noArgs: []string{"receiver-bind-address", "receiver-secret-file"}},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := renderChartErr(repoRoot(t), map[string]any{"receiver": c.receiver})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("render error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			dep, ctr := manager(t, out.Objects)
			args := parseArgs(t, ctr.Args)
			for k, v := range c.wantArgs {
				if args[k] != v {
					t.Errorf("--%s = %q, want %q", k, args[k], v)
				}
			}
			for _, k := range c.noArgs {
				if _, ok := args[k]; ok {
					t.Errorf("--%s rendered", k)
				}
			}
			_, hasSecretFile := args["receiver-secret-file"]
			mounted := false
			for _, v := range dep.Spec.Template.Spec.Volumes {
				mounted = mounted || v.Name == "receiver-secret"
			}
			if mounted != hasSecretFile {
				t.Errorf("receiver-secret volume %t, --receiver-secret-file %t: want both or neither", mounted, hasSecretFile)
			}
		})
	}
}
