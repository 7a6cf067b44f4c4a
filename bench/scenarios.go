package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

func selector(label string) []string { return []string{"--watch-label-selector", "bench=" + label} }

func (e *env) s3Ops(fams metricFamilies) map[string]float64 {
	return fams.byLabel("bucketkeeper_s3_requests_total", "operation", nil)
}

// probingRun is one strategy's steady state.
type probingRun struct {
	PerSecond         []float64          `json:"probesPerSecond"`
	Peak              float64            `json:"peakPerSecond"`
	Mean              float64            `json:"meanPerSecond"`
	StatusWrites      float64            `json:"statusWrites"`
	APIRequests       map[string]float64 `json:"apiRequests"`
	APITotal          float64            `json:"apiRequestsTotal"`
	CPUSecondsPer1000 float64            `json:"cpuSecondsPer1000Probes"`
	Probes            float64            `json:"probes"`
}

const steadyInterval = 30 * time.Second

// steady: N buckets probed every 30s for four intervals after a warm-up interval, with
// our scheduler and with a single global ticker, in the same binary and harness.
func (e *env) steady() error {
	const ns = "steady"
	if err := e.newNamespace(ns); err != nil {
		return err
	}
	if err := e.createBuckets(ns, ns, e.n, steadyInterval); err != nil {
		return err
	}
	runs := map[string]*probingRun{}
	for _, strategy := range []string{"scheduler", "global-ticker"} {
		m, err := startManager(e.bin, e.kubeconfig, e.dir, ns+"-"+strategy, append(selector(ns), "--probe-strategy", strategy, "--default-probe-interval", steadyInterval.String())...)
		if err != nil {
			return err
		}
		if err := e.waitAll(ns, bkv1.ConditionAvailable, e.n, 20*time.Minute); err != nil {
			m.stop()
			return err
		}
		time.Sleep(steadyInterval) // warm-up: start-up work is not steady state
		// Where the CPU goes: `go tool pprof -top bench/results/cpu-<strategy>.pb.gz`.
		prof := m.profileCPU(filepath.Join(e.results, "cpu-"+strategy+".pb.gz"), 4*steadyInterval)
		run, err := e.measureProbing(m, 4*steadyInterval)
		if perr := <-prof; perr != nil {
			fmt.Printf("   %s: no CPU profile: %v\n", strategy, perr)
		}
		m.stop()
		if err != nil {
			return err
		}
		runs[strategy] = run
		fmt.Printf("   %-14s peak/mean %.2f, %.0f probes, %.0f status writes, %.0f API requests\n", strategy, run.Peak/run.Mean, run.Probes, run.StatusWrites, run.APITotal)
	}
	ours, base := runs["scheduler"], runs["global-ticker"]
	e.note("steady", "probes/s peak/mean (ours vs baseline)", fmt.Sprintf("%.2f vs %.2f", ours.Peak/ours.Mean, base.Peak/base.Mean), "≤ 1.5 vs ≈ N per interval-second")
	e.note("steady", "status writes ours/baseline", fmt.Sprintf("%.0f / %.0f = %.1f%%", ours.StatusWrites, base.StatusWrites, 100*ours.StatusWrites/math.Max(base.StatusWrites, 1)), "≤ 2%")
	e.note("steady", "API requests ours/baseline", fmt.Sprintf("%.0f / %.0f = %.1f%%", ours.APITotal, base.APITotal, 100*ours.APITotal/math.Max(base.APITotal, 1)), "")
	e.note("steady", "CPU-s per 1000 probes (ours vs baseline)", fmt.Sprintf("%.2f vs %.2f", ours.CPUSecondsPer1000, base.CPUSecondsPer1000), "")
	if err := plotProbes(e.results, steadyInterval, ours.PerSecond, base.PerSecond); err != nil {
		return err
	}
	return e.writeResult("steady", map[string]any{"n": e.n, "intervalSeconds": steadyInterval.Seconds(), "scheduler": ours, "globalTicker": base})
}

func (e *env) measureProbing(m *manager, window time.Duration) (*probingRun, error) {
	probes := func() float64 { f, _ := m.scrape(); return f.sum("bucketkeeper_probes_total", nil) }
	writes := func() float64 {
		f, _ := m.scrape()
		return f.sum("bucketkeeper_status_writes_total", map[string]string{"kind": "StorageBucket"})
	}
	api := e.apiStart()
	w0, p0, cpu0 := writes(), probes(), m.cpuSeconds()
	run := &probingRun{}
	last := p0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for end := time.Now().Add(window); time.Now().Before(end); {
		<-tick.C
		cur := probes()
		run.PerSecond = append(run.PerSecond, cur-last)
		last = cur
	}
	run.Probes = last - p0
	run.StatusWrites = writes() - w0
	run.APIRequests, run.APITotal = e.apiSince(api)
	run.Peak = slices.Max(run.PerSecond)
	run.Mean = run.Probes / float64(len(run.PerSecond))
	run.CPUSecondsPer1000 = (m.cpuSeconds() - cpu0) / math.Max(run.Probes, 1) * 1000
	return run, nil
}

// change: while N buckets probe every 10s, change the tags of 50 random buckets; time
// until each has observedGeneration == generation and Ready=True.
func (e *env) change() error {
	const ns = "change"
	m, err := e.probingBuckets(ns, 10*time.Second)
	if err != nil {
		return err
	}
	defer m.stop()
	time.Sleep(15 * time.Second)
	picks := rand.Perm(e.n)[:min(50, e.n)]
	type pending struct {
		key     client.ObjectKey
		gen     int64
		changed time.Time
	}
	var todo []pending
	for i, idx := range picks {
		sb := &bkv1.StorageBucket{}
		key := client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("b-%05d", idx)}
		if err := e.k8s.Get(e.ctx, key, sb); err != nil {
			return err
		}
		patch := client.MergeFrom(sb.DeepCopy())
		sb.Spec.Tags["changed"] = fmt.Sprint(i)
		at := time.Now()
		if err := e.k8s.Patch(e.ctx, sb, patch); err != nil {
			return err
		}
		todo = append(todo, pending{key, sb.Generation, at})
	}
	var lat []float64
	deadline := time.Now().Add(5 * time.Minute)
	for len(todo) > 0 && time.Now().Before(deadline) {
		rest := todo[:0]
		for _, p := range todo {
			sb := &bkv1.StorageBucket{}
			if err := e.k8s.Get(e.ctx, p.key, sb); err == nil && sb.Status.ObservedGeneration >= p.gen && apimeta.IsStatusConditionTrue(sb.Status.Conditions, bkv1.ConditionReady) {
				lat = append(lat, time.Since(p.changed).Seconds())
				continue
			}
			rest = append(rest, p)
		}
		todo = rest
		time.Sleep(20 * time.Millisecond)
	}
	if len(todo) > 0 {
		return fmt.Errorf("%d changes not converged after 5 minutes", len(todo))
	}
	sort.Float64s(lat)
	p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
	e.note("change", "tag change to Ready p50 / p99", fmt.Sprintf("%.0fms / %.0fms", p50*1000, p99*1000), "p99 ≤ 2s")
	return e.writeResult("change", map[string]any{"n": e.n, "changes": len(lat), "p50Seconds": p50, "p99Seconds": p99, "latenciesSeconds": lat})
}

func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(math.Ceil(q*float64(len(sorted))))-1)]
}

// memory: manager RSS after convergence at N and 5N buckets (bytes per bucket from the
// slope), then 2000 unrelated 100 KiB Secrets, which the manager must not cache.
func (e *env) memory() error {
	const ns = "memory"
	m, err := e.namespaceWithManager(ns)
	if err != nil {
		return err
	}
	defer m.stop()
	// settle returns RSS (what the node sees) and the live heap as of the last
	// collection (what the operator holds), after a forced collection.
	settle := func(n int) (float64, float64, error) {
		if err := e.waitAll(ns, bkv1.ConditionReady, n, 30*time.Minute); err != nil {
			return 0, 0, err
		}
		time.Sleep(20 * time.Second)
		m.collect()
		rss, _ := m.rss()
		live, err := m.liveHeap()
		if err != nil {
			return 0, 0, err
		}
		fmt.Printf("   with %d buckets: RSS %.1f MiB, live heap %.1f MiB\n", n, rss/(1<<20), live/(1<<20))
		return rss, live, nil
	}
	counts := []int{e.n, 5 * e.n}
	var rss, live []float64
	created := 0
	for _, n := range counts {
		if err := e.createMore(ns, created, n); err != nil {
			return err
		}
		created = n
		r, l, err := settle(n)
		if err != nil {
			return err
		}
		rss, live = append(rss, r), append(live, l)
	}
	livePerBucket := (live[1] - live[0]) / float64(counts[1]-counts[0])
	// Where the memory goes: `go tool pprof -top bench/results/heap.pb.gz`.
	if err := m.saveHeapProfile(filepath.Join(e.results, "heap.pb.gz")); err != nil {
		return err
	}
	perBucket := (rss[1] - rss[0]) / float64(counts[1]-counts[0])
	base := rss[0] - perBucket*float64(counts[0])

	if err := e.newNamespace("noise"); err != nil {
		return err
	}
	payload := make([]byte, 100<<10)
	for i := range 2000 {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "noise", Name: fmt.Sprintf("noise-%04d", i)}, Data: map[string][]byte{"blob": payload}}
		if err := e.k8s.Create(e.ctx, s); err != nil {
			return err
		}
	}
	time.Sleep(20 * time.Second)
	m.collect()
	withNoise, _ := m.rss()
	growth := withNoise - rss[1]
	e.note("memory", "RSS at N / 5N (after a forced GC)", fmt.Sprintf("%.1f / %.1f MiB", rss[0]/(1<<20), rss[1]/(1<<20)), "≤ 64 MiB + 8 KiB per bucket")
	e.note("memory", "RSS per bucket (slope), intercept", fmt.Sprintf("%.1f KiB, %.1f MiB", perBucket/1024, base/(1<<20)), "≤ 8 KiB")
	e.note("memory", "live heap at N / 5N; per bucket (slope)", fmt.Sprintf("%.1f / %.1f MiB; %.1f KiB", live[0]/(1<<20), live[1]/(1<<20), livePerBucket/1024), "")
	e.note("memory", "RSS growth from 2000×100 KiB Secrets", fmt.Sprintf("%.1f MiB (their size: 195 MiB)", growth/(1<<20)), "unaffected")
	if err := plotRSS(e.results, counts, rss); err != nil {
		return err
	}
	return e.writeResult("memory", map[string]any{"counts": counts, "rssBytes": rss, "bytesPerBucket": perBucket, "liveHeapBytes": live, "liveHeapBytesPerBucket": livePerBucket, "interceptBytes": base, "rssWithSecretsBytes": withNoise, "growthFromSecretsBytes": growth})
}

func (e *env) createMore(ns string, from, to int) error {
	for i := from; i < to; i += e.n {
		if err := e.createRange(ns, "memory", storeName, i, min(to, i+e.n), 5*time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// outage: the store goes away for 60s under N probing buckets: how hard the operator
// knocks on a closed door, and how fast all buckets are Available once it reopens.
func (e *env) outage() error {
	const ns = "outage"
	m, err := e.probingBuckets(ns, 10*time.Second)
	if err != nil {
		return err
	}
	defer m.stop()
	if err := e.s3.Stop(); err != nil {
		return err
	}
	time.Sleep(10 * time.Second) // the verdict reaches every bucket first
	f0, _ := m.scrape()
	time.Sleep(50 * time.Second)
	f1, _ := m.scrape()
	down := diff(e.s3Ops(f1), e.s3Ops(f0))
	total := 0.0
	for _, v := range down {
		total += v
	}
	rate := total / 50
	if err := e.s3.Start(); err != nil {
		return err
	}
	back := time.Now()
	if err := e.waitAll(ns, bkv1.ConditionAvailable, e.n, 10*time.Minute); err != nil {
		return err
	}
	recovery := time.Since(back)
	e.note("outage", "requests/s to the store while down", fmt.Sprintf("%.2f", rate), "≤ 1")
	e.note("outage", "store back → all Available", fmt.Sprintf("%.1fs", recovery.Seconds()), "")
	return e.writeResult("outage", map[string]any{"n": e.n, "requestsWhileDown": down, "requestsPerSecondWhileDown": rate, "recoverySeconds": recovery.Seconds()})
}

// probingBuckets starts a manager for a new namespace of N buckets probed every interval
// and returns once all are Available.
func (e *env) probingBuckets(ns string, interval time.Duration) (*manager, error) {
	m, err := e.namespaceWithManager(ns)
	if err != nil {
		return nil, err
	}
	if err := e.createBuckets(ns, ns, e.n, interval); err != nil {
		m.stop()
		return nil, err
	}
	if err := e.waitAll(ns, bkv1.ConditionAvailable, e.n, 20*time.Minute); err != nil {
		m.stop()
		return nil, err
	}
	return m, nil
}

// namespaceWithManager makes a scenario's namespace and starts a manager that watches
// only that scenario's StorageBuckets.
func (e *env) namespaceWithManager(ns string) (*manager, error) {
	if err := e.newNamespace(ns); err != nil {
		return nil, err
	}
	return startManager(e.bin, e.kubeconfig, e.dir, ns, selector(ns)...)
}
