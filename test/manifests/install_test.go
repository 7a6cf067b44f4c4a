package manifests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/receiver"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// installer is the state one install test shares between its steps.
type installer struct {
	t       *testing.T
	ctx     context.Context
	cluster *testenv.Cluster
	c       client.Client
	cs      kubernetes.Interface
	store   *testenv.S3Server
}

// TestInstall installs the operator as users install a release, on a real node
// (testenv.Cluster), from what `make release-dry-run` made of this commit (nothing
// from the source tree): its image archive imported into the node's containerd, the
// packaged chart with `helm install`, then, after `helm uninstall`, the rendered
// bundle as `kubectl apply --server-side -f bucketkeeper.yaml` would, each running the
// release's image as two replicas.
// What only a real Pod shows is checked on the running processes: user 65532, a
// read-only root, no capabilities, the in-cluster configuration and token, the probes,
// leader election, metrics and the receiver through their Services, an upgrade that
// rolls without losing a bucket, and an uninstall that keeps CRDs and buckets.
func TestInstall(t *testing.T) {
	in := &installer{t: t}
	var cancel context.CancelFunc
	in.ctx, cancel = context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ctrllog.SetLogger(logr.Discard()) // the client's own logging: nothing the test reads
	begin := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(begin).Seconds(), what) }
	release := releaseDist(t)
	clientImage, err := buildKeylessClientImage(t, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	step("release " + release.Version + " built, the keyless client's image too")
	// The cluster's ServiceAccount tokens are checked by Ceph RGW (keyless access).
	issuer := testenv.NewIssuerFor(t)
	in.cluster = testenv.NewClusterWith(t, testenv.ClusterOptions{Issuer: issuer})
	step("cluster ready")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster logs:\n%s", in.cluster.Logs())
		}
	})
	if err := in.cluster.ImportImage(release.Image); err != nil {
		t.Fatal(err)
	}
	scheme := in.cluster.Scheme
	for _, add := range []func(*runtime.Scheme) error{bkv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	if in.c, err = client.New(in.cluster.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	in.cs = kubernetes.NewForConfigOrDie(in.cluster.Config)
	in.store = testenv.NewS3(t, testenv.SeaweedFS)

	// helm install of the packaged chart, as docs/install.md says, with the signed
	// webhook on and a key of the namespace "apps" (provision's), in the release
	// namespace.
	in.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
	in.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: receiverKeyID,
		Labels:      map[string]string{bkv1.LabelSecretRole: bkv1.SecretRoleReceiverKey},
		Annotations: map[string]string{bkv1.AnnotationReceiverNamespaces: "apps"}},
		StringData: map[string]string{bkv1.ReceiverKeySecretKey: receiverKeySecret}})
	values := map[string]any{"receiver": map[string]any{"enabled": true}}
	helm := in.helm()
	chrt, err := loader.Load(release.Chart)
	if err != nil {
		t.Fatal(err)
	}
	checkReleaseImage(t, release, releasedRepository+":"+chrt.Metadata.AppVersion)
	install := action.NewInstall(helm)
	install.ReleaseName, install.Namespace, install.Wait, install.Timeout = releaseName, namespace, true, 5*time.Minute
	if _, err := install.RunWithContext(in.ctx, chrt, values); err != nil {
		t.Fatalf("helm install: %v\n%s", err, in.podReport())
	}
	step("helm install done")
	pods := in.runningReplicas(2)
	in.checkProcesses(pods)
	leader := in.leader(pods)
	step("replicas checked; " + leader + " leads")

	bucket := in.provision()
	step("bucket Ready and Available")
	in.checkMetrics()
	in.checkReceiver()
	step("metrics and receiver checked through their Services")
	rgw := testenv.NewS3With(t, testenv.RGW, testenv.S3Options{RGWSTS: true})
	if err := rgw.TrustIssuer(issuer); err != nil {
		t.Fatal(err)
	}
	in.keyless(rgw, issuer, clientImage)
	step("a Pod with no key reached its bucket on RGW with its ServiceAccount's token")
	in.move(rgw)
	step("a bucket moved from SeaweedFS to RGW by mover Jobs, one of their pods killed mid-copy")

	// The leader's Pod goes; the other replica takes the Lease. The node is cordoned
	// meanwhile (as in a drain), so that the Pod replacing the leader cannot start and
	// win the released Lease first.
	in.cordon(true)
	if err := in.cs.CoreV1().Pods(namespace).Delete(in.ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var survivor string
	for _, p := range pods {
		if p.Name != leader {
			survivor = p.Name
		}
	}
	in.eventually(2*time.Minute, "the surviving replica "+survivor+" to take the Lease", func() error {
		if holder := in.leaseHolder(); !strings.HasPrefix(holder, survivor+"_") {
			return fmt.Errorf("Lease held by %q", holder)
		}
		return nil
	})
	step("failed over to " + survivor)
	in.cordon(false)

	// helm upgrade with a changed value rolls both replicas; the bucket stays.
	values["logging"] = map[string]any{"level": "debug"}
	upgrade := action.NewUpgrade(helm)
	upgrade.Namespace, upgrade.Wait, upgrade.Timeout = namespace, true, 5*time.Minute
	if _, err := upgrade.RunWithContext(in.ctx, releaseName, chrt, values); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, in.podReport())
	}
	rolled := in.runningReplicas(2)
	for _, p := range rolled {
		if !strings.Contains(strings.Join(p.Spec.Containers[0].Args, " "), "--zap-log-level=debug") {
			t.Errorf("after helm upgrade, Pod %s runs the old template: %v", p.Name, p.Spec.Containers[0].Args)
		}
	}
	in.leader(rolled)
	in.bucketStays(bucket, "after helm upgrade")
	step("upgraded")

	// helm uninstall leaves the CRDs, the StorageBucket and the bucket.
	if _, err := action.NewUninstall(helm).Run(releaseName); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	in.eventually(2*time.Minute, "the release's Pods to go", func() error {
		list, err := in.cs.CoreV1().Pods(namespace).List(in.ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) > 0 {
			return fmt.Errorf("%d Pods left (%v)", len(list.Items), err)
		}
		return nil
	})
	for _, name := range []string{"storagebuckets.bucketkeeper.io", "objectstores.bucketkeeper.io", "bucketaccesses.bucketkeeper.io"} {
		if err := in.c.Get(in.ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			t.Errorf("after helm uninstall, CRD %s: %v", name, err)
		}
	}
	in.bucketStays(bucket, "after helm uninstall")
	step("uninstalled")

	// kubectl apply -f bucketkeeper.yaml: the same operator, installed the other way,
	// takes the bucket over.
	objs := decodeAll(t, release.Bundle, readFileAbs(t, release.Bundle))
	for _, first := range []bool{true, false} { // Namespace and CRDs first
		for _, o := range objs {
			if kind := o.GetKind(); (kind == "Namespace" || kind == "CustomResourceDefinition") == first {
				applyForReal(in.ctx, t, in.c, o)
			}
		}
	}
	in.eventually(5*time.Minute, "the bundle's Deployment to be available", func() error {
		d := &appsv1.Deployment{}
		if err := in.c.Get(in.ctx, client.ObjectKey{Namespace: namespace, Name: find(t, objs, "Deployment").GetName()}, d); err != nil {
			return err
		}
		if d.Status.ReadyReplicas != 2 || d.Status.UpdatedReplicas != 2 {
			return fmt.Errorf("%d ready, %d updated\n%s", d.Status.ReadyReplicas, d.Status.UpdatedReplicas, in.podReport())
		}
		return nil
	})
	applied := in.runningReplicas(2)
	in.checkProcesses(applied)
	in.leader(applied)
	in.bucketStays(bucket, "under the bundle's operator")
	step("bundle applied")
}

// helm returns a Helm action configuration on the cluster, storing releases in Secrets.
func (in *installer) helm() *action.Configuration {
	kubeconfig, ns := in.cluster.Kubeconfig, namespace
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, namespace, "secret", func(format string, v ...any) {}); err != nil {
		in.t.Fatal(err)
	}
	return cfg
}

// cordon marks the node unschedulable, or schedulable again.
func (in *installer) cordon(unschedulable bool) {
	in.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, unschedulable)
	if _, err := in.cs.CoreV1().Nodes().Patch(in.ctx, testenv.NodeName, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		in.t.Fatal(err)
	}
}

func (in *installer) create(o client.Object) {
	in.t.Helper()
	if err := in.c.Create(in.ctx, o); err != nil {
		in.t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

// eventually checks cond every half second until it holds (returns nil), failing the
// test with cond's last error when timeout passes first.
func (in *installer) eventually(timeout time.Duration, what string, cond func() error) {
	in.t.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(in.ctx, 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	}); err != nil {
		in.t.Fatalf("waiting for %s: %v (%v)", what, last, err)
	}
}

// runningReplicas waits until exactly n manager Pods exist, all Running and Ready and
// none terminating, and returns them.
func (in *installer) runningReplicas(n int) []corev1.Pod {
	in.t.Helper()
	var pods []corev1.Pod
	in.eventually(5*time.Minute, fmt.Sprintf("%d manager Pods Running and Ready", n), func() error {
		list, err := in.cs.CoreV1().Pods(namespace).List(in.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(p) {
				pods = append(pods, p)
			}
		}
		if len(pods) != n || len(list.Items) != n {
			return fmt.Errorf("%d of %d Pods Running and Ready\n%s", len(pods), len(list.Items), in.podReport())
		}
		return nil
	})
	return pods
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podReport describes the namespace's Pods and their events, for a failure message.
func (in *installer) podReport() string {
	var b strings.Builder
	list, err := in.cs.CoreV1().Pods(namespace).List(in.ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, p := range list.Items {
		fmt.Fprintf(&b, "Pod %s: %s", p.Name, p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " ready=%v restarts=%d", cs.Ready, cs.RestartCount)
			if w := cs.State.Waiting; w != nil {
				fmt.Fprintf(&b, " waiting: %s %s", w.Reason, w.Message)
			}
			if l := cs.LastTerminationState.Terminated; l != nil {
				fmt.Fprintf(&b, " last exit %d: %s %s", l.ExitCode, l.Reason, l.Message)
			}
		}
		b.WriteString("\n")
	}
	events, err := in.cs.CoreV1().Events(namespace).List(in.ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range events.Items {
			if e.Type != corev1.EventTypeNormal {
				fmt.Fprintf(&b, "event %s %s: %s\n", e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
	return b.String()
}

// leaseHolder returns the holder of the manager's leader-election Lease ("" if none).
func (in *installer) leaseHolder() string {
	lease := &coordinationv1.Lease{}
	if err := in.c.Get(in.ctx, client.ObjectKey{Namespace: namespace, Name: "bucketkeeper.io"}, lease); err != nil {
		return ""
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// leader waits until one of pods holds the Lease and returns its name.
func (in *installer) leader(pods []corev1.Pod) string {
	in.t.Helper()
	var leader string
	in.eventually(2*time.Minute, "a replica to lead", func() error {
		holder := in.leaseHolder()
		for _, p := range pods {
			if strings.HasPrefix(holder, p.Name+"_") {
				leader = p.Name
				return nil
			}
		}
		return fmt.Errorf("Lease held by %q", holder)
	})
	return leader
}

// checkMetrics scrapes the metrics Service from the node's network, as Prometheus in
// the cluster would: refused without a token, forbidden to a ServiceAccount the chart's
// metrics-reader ClusterRole is not bound to, served to one it is.
func (in *installer) checkMetrics() {
	in.t.Helper()
	svc, err := in.cs.CoreV1().Services(namespace).Get(in.ctx, releaseName+"-metrics", metav1.GetOptions{})
	if err != nil {
		in.t.Fatal(err)
	}
	for _, sa := range []string{"scraper", "stranger"} {
		in.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sa}})
	}
	in.create(&rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: releaseName + "-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: namespace}},
	})
	url := fmt.Sprintf("https://%s:%d/metrics", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
	hc := in.cluster.HTTPClient(nil) // the metrics server's certificate is self-signed
	for _, tc := range []struct {
		who, sa string
		want    int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a ServiceAccount without the metrics-reader role", "stranger", http.StatusForbidden},
		{"a ServiceAccount bound to the metrics-reader role", "scraper", http.StatusOK},
	} {
		token := ""
		if tc.sa != "" {
			token = in.token(tc.sa)
		}
		// The binding reaches the authorizer's cache within moments: retry until the
		// answer is the one wanted, and report the last one otherwise.
		in.eventually(time.Minute, fmt.Sprintf("GET %s as %s to answer %d", url, tc.who, tc.want), func() error {
			req, _ := http.NewRequestWithContext(in.ctx, http.MethodGet, url, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			if resp.StatusCode != tc.want {
				return fmt.Errorf("%s: %.200s", resp.Status, body)
			}
			if tc.want == http.StatusOK && !strings.Contains(string(body), "bucketkeeper_") {
				return fmt.Errorf("no bucketkeeper_ series in the scrape")
			}
			return nil
		})
	}
}

// The namespaced receiver key TestInstall writes into the release namespace.
const (
	receiverKeyID     = "apps-ci"
	receiverKeySecret = "a-test-hmac-key-of-32-characters"
)

// checkReceiver posts probe requests to the receiver's Service: the webhook listens
// there, refuses an unsigned request, and knows the key of "apps" that the release
// namespace holds (read by default from the pod's namespace, under the chart's RBAC):
// a request signed with it about a missing claim of "apps" is answered 404, not 401.
func (in *installer) checkReceiver() {
	in.t.Helper()
	svc, err := in.cs.CoreV1().Services(namespace).Get(in.ctx, releaseName+"-receiver", metav1.GetOptions{})
	if err != nil {
		in.t.Fatal(err)
	}
	url := fmt.Sprintf("http://%s:%d/v1/probe", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
	post := func(signed bool, want int) error {
		body := `{"namespace":"apps","name":"absent"}`
		req, err := http.NewRequestWithContext(in.ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return err
		}
		if signed {
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			req.Header.Set(receiver.KeyIDHeader, receiverKeyID)
			req.Header.Set(receiver.TimestampHeader, ts)
			req.Header.Set(receiver.SignatureHeader, receiver.SignWithKey(receiverKeyID, []byte(receiverKeySecret), ts, []byte(body)))
		}
		resp, err := in.cluster.HTTPClient(nil).Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			return fmt.Errorf("POST %s (signed %t): %s, want %d", url, signed, resp.Status, want)
		}
		return nil
	}
	in.eventually(time.Minute, "the receiver to refuse an unsigned request", func() error { return post(false, http.StatusUnauthorized) })
	in.eventually(time.Minute, "the receiver to know the key of apps", func() error { return post(true, http.StatusNotFound) })
}

func (in *installer) token(sa string) string {
	in.t.Helper()
	tr, err := in.cs.CoreV1().ServiceAccounts(namespace).CreateToken(in.ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo[int64](3600)}},
		metav1.CreateOptions{})
	if err != nil {
		in.t.Fatalf("token for %s: %v", sa, err)
	}
	return tr.Status.Token
}
