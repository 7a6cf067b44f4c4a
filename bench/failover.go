package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// failoverConfig are the failover scenario's windows, configurable so that a short run
// is possible. The sync interval of both managers is the after-window's length: a
// window of one sync interval holds each bucket's periodic configuration check once,
// before the kill as after it, so the two windows compare like with like; with the
// default 10m interval a 2-minute window would hold a fifth of them, on average, in both.
type failoverConfig struct {
	interval time.Duration // probe interval of the buckets
	before   time.Duration // steady window before the kill
	after    time.Duration // window after the kill
	sync     time.Duration // --sync-interval of both managers
}

func failoverSettings() (failoverConfig, error) {
	c := failoverConfig{}
	for _, s := range []struct {
		env string
		def time.Duration
		to  *time.Duration
	}{
		{"BENCH_FAILOVER_INTERVAL", steadyInterval, &c.interval},
		{"BENCH_FAILOVER_BEFORE", 4 * time.Minute, &c.before},
		{"BENCH_FAILOVER_AFTER", 2 * time.Minute, &c.after},
	} {
		d, err := time.ParseDuration(envOr(s.env, s.def.String()))
		if err != nil || d <= 0 {
			return c, fmt.Errorf("%s: want a positive duration, got %q", s.env, envOr(s.env, ""))
		}
		*s.to = d
	}
	c.sync = c.after
	return c, nil
}

// counters are one manager's totals at one moment.
type counters struct{ s3, writes, probes, leads float64 }

func (m *manager) counters() (counters, bool) {
	if m.Exited() {
		return counters{}, false
	}
	f, err := m.scrape()
	if err != nil {
		return counters{}, false
	}
	return counters{
		s3:     f.sum("bucketkeeper_s3_requests_total", nil),
		writes: f.sum("bucketkeeper_status_writes_total", map[string]string{"kind": "StorageBucket"}),
		probes: f.sum("bucketkeeper_probes_total", nil),
		leads:  f.sum("leader_election_master_status", nil),
	}, true
}

// failover: N buckets Ready and probing under two manager processes that share a
// leader-election lease; the leader is killed with SIGKILL (no release of the lease)
// and the standby takes over once the lease expires. What it costs: the takeover time,
// S3 requests per second around the kill, status writes, and the S3 requests of the
// window after the kill against those of the same length of steady probing.
func (e *env) failover() error {
	const ns = "failover"
	cfg, err := failoverSettings()
	if err != nil {
		return err
	}
	if err := e.newNamespace(ns); err != nil {
		return err
	}
	if err := e.createBuckets(ns, ns, e.n, cfg.interval); err != nil {
		return err
	}
	args := append(selector(ns), "--leader-elect", "--leader-election-namespace", "bench-system", "--leader-election-id", "bench-failover",
		"--sync-interval", cfg.sync.String())
	leader, err := startManager(e.bin, e.kubeconfig, e.dir, ns+"-a", args...)
	if err != nil {
		return err
	}
	defer leader.stop()
	if err := waitFor(e.ctx, time.Minute, "the first manager to lead", func() (bool, error) { return leads(leader), nil }); err != nil {
		return err
	}
	standby, err := startManager(e.bin, e.kubeconfig, e.dir, ns+"-b", args...)
	if err != nil {
		return err
	}
	defer standby.stop()
	if err := e.waitAll(ns, bkv1.ConditionAvailable, e.n, 20*time.Minute); err != nil {
		return err
	}
	// Past the creation burst: the steady window holds periodic probes and syncs only.
	fmt.Printf("   all Available; %s of warm-up, then %s steady, kill, %s after\n", cfg.sync, cfg.before, cfg.after)
	time.Sleep(cfg.sync)

	// Each manager's counters are its own since it started: the window's figures are
	// the sums of each one's increments, sampled every second.
	managers := []*manager{leader, standby}
	last := make([]counters, len(managers))
	for i, m := range managers {
		c, ok := m.counters()
		if !ok {
			return fmt.Errorf("manager %d: no metrics", i)
		}
		last[i] = c
	}
	if last[1].leads > 0 || last[1].probes > 0 {
		return fmt.Errorf("the standby leads or probes before the kill")
	}
	var perSecond, writesPerSecond []float64
	var killedAt time.Time
	leadAfter, probeAfter := time.Duration(-1), time.Duration(-1)
	before, beforeWrites, after, afterWrites := 0.0, 0.0, 0.0, 0.0
	// led counts what the new leader sent from the second it led on, and for how long:
	// its rate against the steady one, without the leaderless seconds of the takeover.
	led, ledSeconds := 0.0, 0.0
	api := apiWindow{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	start := time.Now()
	for end := start.Add(cfg.before + cfg.after); time.Now().Before(end); {
		<-tick.C
		if killedAt.IsZero() && time.Since(start) >= cfg.before {
			leader.Kill()
			killedAt = time.Now()
			api = e.apiStart()
			fmt.Printf("   leader killed (SIGKILL) after %s of steady probing\n", cfg.before)
		}
		d, w := 0.0, 0.0
		for i, m := range managers {
			c, ok := m.counters()
			if !ok {
				continue // the killed leader: what it sent in its last second is lost
			}
			d, w = d+math.Max(0, c.s3-last[i].s3), w+math.Max(0, c.writes-last[i].writes)
			last[i] = c
		}
		perSecond, writesPerSecond = append(perSecond, d), append(writesPerSecond, w)
		if killedAt.IsZero() {
			before, beforeWrites = before+d, beforeWrites+w
			continue
		}
		after, afterWrites = after+d, afterWrites+w
		now := time.Now()
		if leadAfter < 0 && last[1].leads > 0 {
			leadAfter = now.Sub(killedAt)
		}
		if probeAfter < 0 && last[1].probes > 0 {
			probeAfter = now.Sub(killedAt)
		}
		if leadAfter >= 0 {
			led, ledSeconds = led+d, ledSeconds+1
		}
	}
	apiReqs, apiTotal := e.apiSince(api)
	if leadAfter < 0 || probeAfter < 0 {
		return fmt.Errorf("the standby did not take over within %s (leads: %v, probes: %v)", cfg.after, leadAfter >= 0, probeAfter >= 0)
	}
	available, err := e.countTrue(ns, bkv1.ConditionAvailable)
	if err != nil {
		return err
	}
	steady := before * cfg.after.Seconds() / cfg.before.Seconds()
	ratio := after / math.Max(steady, 1)
	e.note("failover", "takeover: leads / first probe after SIGKILL", fmt.Sprintf("%.0fs / %.0fs (lease 15s, 1s samples)", leadAfter.Seconds(), probeAfter.Seconds()), "")
	e.note("failover", fmt.Sprintf("S3 requests %s after / steady %s", cfg.after, cfg.after), fmt.Sprintf("%.0f / %.0f = %.2f×", after, steady, ratio), "≤ 1.1")
	steadyRate, ledRate := before/cfg.before.Seconds(), led/math.Max(ledSeconds, 1)
	e.note("failover", "S3 requests/s once the standby leads / steady", fmt.Sprintf("%.1f / %.1f = %.2f×", ledRate, steadyRate, ledRate/math.Max(steadyRate, 0.001)), "")
	e.note("failover", "status writes before / after the kill", fmt.Sprintf("%.0f in %s / %.0f in %s", beforeWrites, cfg.before, afterWrites, cfg.after), "")
	e.note("failover", "Available after the window", fmt.Sprintf("%d / %d", available, e.n), "all")
	if err := plotFailover(e.results, cfg, perSecond); err != nil {
		return err
	}
	return e.writeResult("failover", map[string]any{
		"n": e.n, "probeIntervalSeconds": cfg.interval.Seconds(), "syncIntervalSeconds": cfg.sync.Seconds(),
		"beforeSeconds": cfg.before.Seconds(), "afterSeconds": cfg.after.Seconds(),
		"leadsAfterKillSeconds": leadAfter.Seconds(), "firstProbeAfterKillSeconds": probeAfter.Seconds(),
		"s3RequestsBefore": before, "s3RequestsAfter": after, "steadyS3RequestsPerAfterWindow": steady, "ratio": ratio,
		"s3RequestsPerSecondSteady": steadyRate, "s3RequestsPerSecondOnceLeading": ledRate,
		"statusWritesBefore": beforeWrites, "statusWritesAfter": afterWrites,
		"apiRequestsAfter": apiReqs, "apiRequestsAfterTotal": apiTotal,
		"availableAfter": available, "s3RequestsPerSecond": perSecond, "statusWritesPerSecond": writesPerSecond,
	})
}

// leads says whether m holds the lease (controller-runtime's leader-election gauge).
func leads(m *manager) bool {
	f, err := m.scrape()
	return err == nil && f.sum("leader_election_master_status", nil) > 0
}

// plotFailover draws S3 requests per second around the kill (x = 0).
func plotFailover(dir string, cfg failoverConfig, perSecond []float64) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("S3 requests per second around the leader's SIGKILL (probe interval %s)", cfg.interval)
	p.X.Label.Text = "seconds since the kill"
	p.Y.Label.Text = "requests/s"
	offset := cfg.before.Seconds()
	pts := make(plotter.XYs, len(perSecond))
	for i, y := range perSecond {
		pts[i] = plotter.XY{X: float64(i+1) - offset, Y: y}
	}
	line, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	line.Width = vg.Points(1.5)
	maxY := 1.0
	for _, y := range perSecond {
		maxY = math.Max(maxY, y)
	}
	kill, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 0, Y: maxY}})
	if err != nil {
		return err
	}
	kill.Color = color.RGBA{R: 200, A: 255}
	kill.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	p.Add(line, kill)
	p.Y.Min, p.Y.Max = 0, 1.3*maxY // headroom for the legend above the data
	p.Legend.Add("S3 requests/s, both managers", line)
	p.Legend.Add("SIGKILL of the leader", kill)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(40), -vg.Points(4) // clear of the axis and the title
	return p.Save(8*vg.Inch, 4*vg.Inch, filepath.Join(dir, "failover-s3-per-second.png"))
}
