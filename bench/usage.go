package main

import (
	"bytes"
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// usageRun is one half of the usage scenario.
type usageRun struct {
	*probingRun
	UsageReads float64 `json:"usageReads"`
}

// usage: the steady scenario's status writes with usage refresh on. N buckets on Ceph
// RGW (SeaweedFS, the other scenarios' store, reports no usage), each holding an
// object, probed every 30s for four intervals after a warm-up interval: once with no
// admin API on the store (no usage read), once with one and --usage-interval=1s, so
// every successful probe also reads its bucket's usage, the most a bucket can cost.
// Nothing changes in the buckets, so status writes must stay near zero either way:
// status.usage takes a measurement only when it moved by 1% or is an hour old. The
// runs also show what enabling the admin API costs: no bucket's Ready may flip while
// the edited store is checked (its Ready condition's lastTransitionTime is kept).
func (e *env) usage() error {
	const ns, store = "usage", "bench-rgw"
	fmt.Println("   starting Ceph RGW")
	rgw, err := testenv.StartS3(testenv.RGW)
	if err != nil {
		return err
	}
	defer rgw.Close()
	if err := e.createRGWStore(store, rgw); err != nil {
		return err
	}
	if err := e.newNamespace(ns); err != nil {
		return err
	}
	if err := e.createRange(ns, ns, store, 0, e.n, steadyInterval); err != nil {
		return err
	}
	runs := map[string]*usageRun{}
	var readySince map[string]metav1.Time
	for _, mode := range []string{"without", "with"} {
		if mode == "with" {
			if readySince, err = e.readyTransitions(ns); err != nil {
				return err
			}
			if err := e.enableAdminAPI(store); err != nil {
				return err
			}
		}
		// The lastProbeTime heartbeat (one status write per bucket every 5m) is put
		// out of both windows: the second run's would cross it, the first's not.
		m, err := startManager(e.bin, e.kubeconfig, e.dir, ns+"-"+mode, append(selector(ns),
			"--default-probe-interval", steadyInterval.String(), "--usage-interval", "1s", "--status-heartbeat", "1h")...)
		if err != nil {
			return err
		}
		run, err := e.measureUsageRun(m, ns, mode, rgw)
		m.stop()
		if err != nil {
			return fmt.Errorf("%s usage: %w", mode, err)
		}
		runs[mode] = run
		fmt.Printf("   %-8s usage: %.0f probes, %.0f usage reads, %.0f status writes, %.0f API requests\n", mode, run.Probes, run.UsageReads, run.StatusWrites, run.APITotal)
	}
	after, err := e.readyTransitions(ns)
	if err != nil {
		return err
	}
	flipped := 0
	for name, before := range readySince {
		if now := after[name]; !now.Equal(&before) {
			flipped++
		}
	}
	with, without := runs["with"], runs["without"]
	e.note("usage", "status writes with / without usage (RGW)", fmt.Sprintf("%.0f / %.0f in %.0f probes", with.StatusWrites, without.StatusWrites, with.Probes), "≤ 2% of probes, as steady")
	e.note("usage", "usage reads per probe (with)", fmt.Sprintf("%.0f / %.0f = %.2f", with.UsageReads, with.Probes, with.UsageReads/math.Max(with.Probes, 1)), "≈ 1 (--usage-interval=1s)")
	e.note("usage", "API requests with / without usage", fmt.Sprintf("%.0f / %.0f", with.APITotal, without.APITotal), "")
	e.note("usage", "CPU-s per 1000 probes with / without usage", fmt.Sprintf("%.2f / %.2f", with.CPUSecondsPer1000, without.CPUSecondsPer1000), "")
	e.note("usage", "buckets whose Ready flipped as the admin API was added", fmt.Sprintf("%d / %d", flipped, len(readySince)), "0")
	return e.writeResult("usage", map[string]any{"n": e.n, "intervalSeconds": steadyInterval.Seconds(), "store": "rgw", "with": with, "without": without, "readyFlipped": flipped})
}

// measureUsageRun waits for every bucket to be Available (and, the first time, puts an
// object in each; with usage, for each bucket's usage to show it), lets a warm-up
// interval pass and measures four intervals of steady probing.
func (e *env) measureUsageRun(m *manager, ns, mode string, rgw *testenv.S3Server) (*usageRun, error) {
	if err := e.waitAll(ns, bkv1.ConditionAvailable, e.n, 20*time.Minute); err != nil {
		return nil, err
	}
	if mode == "without" {
		if err := e.putAnObjectInEach(ns, rgw); err != nil {
			return nil, err
		}
	} else if err := e.waitUsage(ns); err != nil {
		return nil, err
	}
	time.Sleep(steadyInterval) // warm-up: start-up work is not steady state
	reads := func() float64 {
		f, _ := m.scrape()
		return f.sum("bucketkeeper_s3_requests_total", map[string]string{"operation": "GetBucketUsage", "code": "200"})
	}
	r0 := reads()
	run, err := e.measureProbing(m, 4*steadyInterval)
	if err != nil {
		return nil, err
	}
	return &usageRun{probingRun: run, UsageReads: reads() - r0}, nil
}

// readyTransitions is each bucket's Ready lastTransitionTime, by name.
func (e *env) readyTransitions(ns string) (map[string]metav1.Time, error) {
	list := &bkv1.StorageBucketList{}
	if err := e.k8s.List(e.ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := map[string]metav1.Time{}
	for i := range list.Items {
		if c := apimeta.FindStatusCondition(list.Items[i].Status.Conditions, bkv1.ConditionReady); c != nil {
			out[list.Items[i].Name] = c.LastTransitionTime
		}
	}
	return out, nil
}

// createRGWStore registers rgw as store, with no admin API yet, and a budget high
// enough that the store is never what limits the measurement.
func (e *env) createRGWStore(name string, rgw *testenv.S3Server) error {
	secrets := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "bench-system", Name: name},
			StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: rgw.AccessKeyID, bkv1.CredentialsKeySecretAccessKey: rgw.SecretAccessKey}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "bench-system", Name: name + "-admin"},
			StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: rgw.AdminOpsAccessKeyID, bkv1.CredentialsKeySecretAccessKey: rgw.AdminOpsSecretAccessKey}},
	}
	for _, s := range secrets {
		if err := e.k8s.Create(e.ctx, s); err != nil {
			return err
		}
	}
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: bkv1.ObjectStoreSpec{
		Endpoint: rgw.Endpoint, Region: rgw.Region, ForcePathStyle: true,
		CredentialsSecretRef: &bkv1.SecretReference{Namespace: "bench-system", Name: name},
		HealthCheck:          bkv1.StoreHealthCheck{Interval: &metav1.Duration{Duration: 5 * time.Second}},
		RequestsPerSecond:    10000, Burst: 10000,
	}}
	return e.k8s.Create(e.ctx, store)
}

// enableAdminAPI gives the store its RGW admin-ops identity (made by createRGWStore).
func (e *env) enableAdminAPI(name string) error {
	store := &bkv1.ObjectStore{}
	if err := e.k8s.Get(e.ctx, client.ObjectKey{Name: name}, store); err != nil {
		return err
	}
	patch := client.MergeFrom(store.DeepCopy())
	store.Spec.AdminAPI = &bkv1.AdminAPI{Type: bkv1.AdminAPIRGWAdminOps,
		CredentialsSecretRef: bkv1.SecretReference{Namespace: "bench-system", Name: name + "-admin"}}
	return e.k8s.Patch(e.ctx, store, patch)
}

// putAnObjectInEach writes a 1 KiB object into every bucket of ns, so usage is not
// all zeros.
func (e *env) putAnObjectInEach(ns string, rgw *testenv.S3Server) error {
	list := &bkv1.StorageBucketList{}
	if err := e.k8s.List(e.ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	s3c := rgw.Client()
	return inParallel(0, len(list.Items), func(i int) error {
		bucket := list.Items[i].Status.BucketName
		_, err := s3c.PutObject(e.ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("object"), Body: bytes.NewReader(make([]byte, 1024))})
		if err != nil {
			return fmt.Errorf("put into %s: %w", bucket, err)
		}
		return nil
	})
}

// waitUsage waits until every bucket of ns shows the object putAnObjectInEach wrote in
// status.usage.
func (e *env) waitUsage(ns string) error {
	return waitFor(e.ctx, 10*time.Minute, "every bucket's usage in status", func() (bool, error) {
		list := &bkv1.StorageBucketList{}
		if err := e.k8s.List(e.ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		shown := 0
		for i := range list.Items {
			if u := list.Items[i].Status.Usage; u != nil && u.Objects == 1 && u.Bytes == 1024 {
				shown++
			}
		}
		return shown == e.n, nil
	})
}
