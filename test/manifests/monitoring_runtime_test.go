package manifests

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// eventMetrics are metrics an alert or a panel watches that show only while what they
// report lasts, which this test does not bring about: a running move, a store's
// retirement, and a deletion waiting for locked versions. test/docs holds every name
// the rules and the dashboard use to what the manager registers
// (TestMonitoringNamesRegisteredMetrics); the alerts' evaluation tests give these their
// shape.
var eventMetrics = map[string]string{
	"bucketkeeper_move_last_progress_timestamp_seconds":            "a running move",
	"bucketkeeper_move_copied_bytes":                               "a running move",
	"bucketkeeper_move_objects_left":                               "a running move",
	"bucketkeeper_objectstore_retirement_buckets":                  "a store's retirement",
	"bucketkeeper_objectstore_retirement_paused":                   "a store's retirement",
	"bucketkeeper_bucket_deletion_blocked_since_timestamp_seconds": "a deletion blocked by object lock",
}

// TestMonitoringMetricsAreExported runs the real manager binary against a real API
// server and Ceph RGW, lets it provision and probe one bucket with a key of its own,
// and scrapes its /metrics: every metric an alert or a dashboard panel uses must be
// there (a histogram as its _bucket, _sum and _count series), so no alert watches a
// name that does not exist (but those of eventMetrics).
func TestMonitoringMetricsAreExported(t *testing.T) {
	refs := referencedMetrics(t)
	bin := managerBinary(t)
	cp := testenv.NewControlPlane(t) // installs config/crd/bases
	// RGW: its admin API reports usage and sets quotas, which the usage and quota
	// series need.
	store := testenv.NewS3(t, testenv.RGW)
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := bkv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The manager as the control plane's admin, metrics over plain HTTP on loopback.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cp.Config.Host, CertificateAuthorityData: cp.Config.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cp.Config.CertData, ClientKeyData: cp.Config.KeyData, Token: cp.Config.BearerToken}
	kc.Contexts["admin"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "admin"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	metricsAddr := freeAddr(t)
	logs := startManager(t, bin, []string{
		"--kubeconfig=" + kubeconfig, "--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=0", "--cluster-id=monitoring-test",
	})

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "store-credentials"},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: store.AccessKeyID, bkv1.CredentialsKeySecretAccessKey: store.SecretAccessKey},
	}
	adminSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "admin-credentials"},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: store.AdminOpsAccessKeyID, bkv1.CredentialsKeySecretAccessKey: store.AdminOpsSecretAccessKey},
	}
	objStore := &bkv1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: "rgw"},
		Spec: bkv1.ObjectStoreSpec{
			Endpoint: store.Endpoint, Region: store.Region, ForcePathStyle: true,
			CredentialsSecretRef: &bkv1.SecretReference{Namespace: ns.Name, Name: secret.Name},
			AdminAPI:             &bkv1.AdminAPI{Type: bkv1.AdminAPIRGWAdminOps, CredentialsSecretRef: bkv1.SecretReference{Namespace: ns.Name, Name: adminSecret.Name}},
			// A key per claim (spec.access below), for bucketkeeper_bucketaccess_ready.
			AccessProvider: &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM},
		},
	}
	maxSize, maxObjects := resource.MustParse("1Gi"), int64(1000)
	sb := &bkv1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "reports"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: objStore.Name},
			Quota: &bkv1.BucketQuota{MaxSize: &maxSize, MaxObjects: &maxObjects}, Access: string(bkv1.AccessReadWrite)},
	}
	for _, o := range []client.Object{ns, secret, adminSecret, objStore, sb} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}
	waitFor(t, 90*time.Second, "the bucket to be provisioned and probed", logs, func() bool {
		got := &bkv1.StorageBucket{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return false
		}
		if !apimeta.IsStatusConditionTrue(got.Status.Conditions, bkv1.ConditionAvailable) {
			return false
		}
		ba := &bkv1.BucketAccess{}
		return c.Get(ctx, client.ObjectKeyFromObject(sb), ba) == nil && apimeta.IsStatusConditionTrue(ba.Status.Conditions, bkv1.ConditionReady)
	})

	// Everything the bucket's provisioning and probe touch is set before its status is
	// written, so one scrape after Available=True must hold every name.
	waitForMetricsServer(t, logs)
	families := scrape(t, "http://"+metricsAddr+"/metrics")
	exported := map[string]bool{}
	for name, f := range families {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exported[name+s] = true
			}
		case dto.MetricType_SUMMARY:
			exported[name+"_sum"], exported[name+"_count"], exported[name] = true, true, true
		default:
			exported[name] = true
		}
	}
	var missing []string
	for name, where := range refs {
		if _, ok := eventMetrics[name]; ok {
			continue
		}
		if !exported[name] {
			missing = append(missing, fmt.Sprintf("%s (used by %s)", name, strings.Join(where, ", ")))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the manager does not export:\n  %s", strings.Join(missing, "\n  "))
	}

	// And the new series carry this bucket's and this store's values.
	wantSeries(t, families, "bucketkeeper_bucket_last_successful_probe_timestamp_seconds", map[string]string{"namespace": ns.Name, "name": sb.Name}, func(v float64) bool {
		return v > float64(time.Now().Add(-5*time.Minute).Unix()) && v <= float64(time.Now().Unix()+1)
	})
	wantSeries(t, families, "bucketkeeper_bucket_probe_interval_seconds", map[string]string{"namespace": ns.Name, "name": sb.Name}, func(v float64) bool { return v == 60 })
	wantSeries(t, families, "bucketkeeper_objectstore_ready", map[string]string{"store": objStore.Name}, func(v float64) bool { return v == 1 })
	bucket := map[string]string{"namespace": ns.Name, "name": sb.Name}
	wantSeries(t, families, "bucketkeeper_bucket_usage_objects", bucket, func(v float64) bool { return v == 0 })
	wantSeries(t, families, "bucketkeeper_bucket_quota_bytes", bucket, func(v float64) bool { return v == 1<<30 })
	wantSeries(t, families, "bucketkeeper_bucket_quota_objects", bucket, func(v float64) bool { return v == 1000 })
	wantSeries(t, families, "bucketkeeper_bucketaccess_ready", bucket, func(v float64) bool { return v == 1 })
}

// scrape reads a Prometheus text exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return families
}

// wantSeries finds the series of a family with exactly these labels and checks its value.
func wantSeries(t *testing.T, families map[string]*dto.MetricFamily, name string, labels map[string]string, ok func(float64) bool) {
	t.Helper()
	for _, m := range families[name].GetMetric() {
		match := len(m.GetLabel()) == len(labels)
		for _, l := range m.GetLabel() {
			if labels[l.GetName()] != l.GetValue() {
				match = false
			}
		}
		if match {
			if v := m.GetGauge().GetValue(); !ok(v) {
				t.Errorf("%s%v = %v", name, labels, v)
			}
			return
		}
	}
	t.Errorf("no series %s%v", name, labels)
}
