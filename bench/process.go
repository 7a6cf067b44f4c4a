package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// manager is one bucketkeeper process, the real binary, so that its CPU time and
// memory are its own and not the harness's.
type manager struct {
	*testenv.Process
	metricsAddr string
	pprofAddr   string
	log         string
}

// collect asks the manager's runtime for a garbage collection (through pprof), so that
// a memory reading reflects what is live rather than when the last GC happened to run.
func (m *manager) collect() {
	resp, err := http.Get("http://" + m.pprofAddr + "/debug/pprof/heap?gc=1")
	if err == nil {
		resp.Body.Close()
	}
	time.Sleep(2 * time.Second)
}

// The chart's default Go runtime tuning (charts/bucketkeeper/values.yaml, goRuntime).
const (
	chartGOGC       = "50"
	chartGOMEMLIMIT = "460MiB"
)

func startManager(bin, kubeconfig, dir, name string, extra ...string) (*manager, error) {
	addrs, err := testenv.FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	addr, pprofAddr := addrs[0], addrs[1]
	logPath := filepath.Join(dir, name+".log")
	args := append([]string{
		"--kubeconfig", kubeconfig,
		"--metrics-bind-address", addr, "--health-probe-bind-address", "0",
		"--concurrency", strconv.Itoa(concurrency),
		"--kube-api-qps", strconv.Itoa(kubeQPS), "--kube-api-burst", strconv.Itoa(2 * kubeQPS),
		"--zap-log-level", "error", "--pprof-bind-address", pprofAddr,
	}, extra...)
	// Its own process group, killed with us whatever happens to the harness. The Go
	// runtime is tuned as the chart's defaults tune it (values.yaml, goRuntime).
	env := append(os.Environ(), "GOGC="+chartGOGC, "GOMEMLIMIT="+chartGOMEMLIMIT)
	proc, err := testenv.StartProcess(bin, args, env, "", logPath)
	if err != nil {
		return nil, err
	}
	m := &manager{Process: proc, metricsAddr: addr, pprofAddr: pprofAddr, log: logPath}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := m.scrape(); err == nil {
			return m, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	m.stop()
	return nil, fmt.Errorf("manager %s did not serve metrics; log %s", name, logPath)
}

// stop ends the manager by PID (SIGTERM, then SIGKILL).
func (m *manager) stop() {
	if m != nil {
		_ = m.Stop()
	}
}

// saveCPUProfile profiles the manager's CPU for d and writes the profile to path, for
// `go tool pprof`; it blocks for d.
func (m *manager) saveCPUProfile(path string, d time.Duration) error {
	return m.savePprof(path, fmt.Sprintf("profile?seconds=%d", int(d.Seconds())))
}

// saveHeapProfile writes the manager's heap profile to path, for `go tool pprof`.
func (m *manager) saveHeapProfile(path string) error {
	return m.savePprof(path, "heap")
}

// savePprof writes the answer of the manager's /debug/pprof/<profile> to path.
func (m *manager) savePprof(path, profile string) error {
	resp, err := http.Get("http://" + m.pprofAddr + "/debug/pprof/" + profile)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// liveHeap is the heap the last collection found reachable (runtime/metrics
// /gc/heap/live:bytes, exported by the manager's Go collector).
func (m *manager) liveHeap() (float64, error) {
	f, err := m.scrape()
	if err != nil {
		return 0, err
	}
	if f["go_gc_heap_live_bytes"] == nil {
		return 0, fmt.Errorf("the manager exports no go_gc_heap_live_bytes")
	}
	return f.sum("go_gc_heap_live_bytes", nil), nil
}

// cpuSeconds is the process's user+system CPU time so far.
func (m *manager) cpuSeconds() float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.PID()))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data)[strings.LastIndexByte(string(data), ')')+2:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// rss returns the current and peak resident set size in bytes.
func (m *manager) rss() (cur, peak float64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", m.PID()))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmRSS:":
			cur = kb * 1024
		case "VmHWM:":
			peak = kb * 1024
		}
	}
	return cur, peak
}

// metricFamilies is one scrape, by metric name.
type metricFamilies map[string]*dto.MetricFamily

func (m *manager) scrape() (metricFamilies, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+m.metricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	// Uncompressed: the harness scrapes every second, far more often than Prometheus
	// does, and compressing each answer would be CPU the manager spends on the harness.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parseMetrics(resp.Body)
}

func parseMetrics(r interface{ Read([]byte) (int, error) }) (metricFamilies, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	return metricFamilies(fams), err
}

// matching yields the metrics of a family whose labels include all of want, with their labels.
func (f metricFamilies) matching(name string, want map[string]string) []labelled {
	var out []labelled
	fam := f[name]
	if fam == nil {
		return nil
	}
outer:
	for _, m := range fam.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue outer
			}
		}
		out = append(out, labelled{labels, m})
	}
	return out
}

type labelled struct {
	labels map[string]string
	metric *dto.Metric
}

// sum adds the values of a counter or gauge whose labels match all of want.
func (f metricFamilies) sum(name string, want map[string]string) float64 {
	total := 0.0
	for _, l := range f.matching(name, want) {
		m := l.metric
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Untyped != nil:
			total += m.Untyped.GetValue()
		}
	}
	return total
}

// byLabel sums a counter by the values of one label.
func (f metricFamilies) byLabel(name, label string, want map[string]string) map[string]float64 {
	out := map[string]float64{}
	for _, l := range f.matching(name, want) {
		out[l.labels[label]] += l.metric.GetCounter().GetValue()
	}
	return out
}

func diff(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s (last error: %v)", timeout, what, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
