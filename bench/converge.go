package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// defaultConvergeRounds is how many times converge measures ours and then the floor
// (BENCH_CONVERGE_ROUNDS). On a shared two-core machine the speed of everything drifts
// over minutes, enough to move the ratio of one pair by a third (1.27× and 1.80× in two
// runs of the same code); the median of interleaved pairs is what is reported.
const defaultConvergeRounds = 3

// convergeRound is one pair: ours, then the floor, on fresh namespaces and buckets.
type convergeRound struct {
	seconds, cpu, rss, peak float64
	apiReqs                 map[string]float64
	apiTotal                float64
	s3                      map[string]float64
	events                  map[string]float64
	floor                   *floorResult
}

func (r *convergeRound) ratio() float64 { return r.seconds / r.floor.Seconds }

// converge: N StorageBuckets created at once, until all are Ready, against a plain loop
// doing the same S3 calls and Kubernetes writes at the same concurrency; the round with
// the median ratio gives every figure.
func (e *env) converge() error {
	rounds := defaultConvergeRounds
	if v := os.Getenv("BENCH_CONVERGE_ROUNDS"); v != "" {
		parsed, err := strconv.Atoi(v)
		if err != nil || parsed <= 0 {
			return fmt.Errorf("BENCH_CONVERGE_ROUNDS=%q: want a positive number", v)
		}
		rounds = parsed
	}
	var all []*convergeRound
	for i := range rounds {
		r, err := e.convergeRound(i)
		if err != nil {
			return err
		}
		fmt.Printf("   round %d: %.1fs / %.1fs = %.2f×\n", i+1, r.seconds, r.floor.Seconds, r.ratio())
		all = append(all, r)
	}
	roundRatios, shown := make([]float64, len(all)), make([]string, len(all))
	for i, r := range all {
		roundRatios[i], shown[i] = r.ratio(), fmt.Sprintf("%.2f", r.ratio())
	}
	byRatio := slices.Clone(all)
	slices.SortFunc(byRatio, func(a, b *convergeRound) int { return cmp.Compare(a.ratio(), b.ratio()) })
	med := byRatio[(len(byRatio)-1)/2]
	floor := med.floor

	e.note("converge", fmt.Sprintf("time to all Ready / floor, median of %d rounds", len(all)),
		fmt.Sprintf("%.1fs / %.1fs = %.2f× (rounds: %s)", med.seconds, floor.Seconds, med.ratio(), strings.Join(shown, ", ")), "≤ 1.3×")
	e.note("converge", "API requests / floor (both with the creates)", fmt.Sprintf("%.0f / %.0f = %.2f×", med.apiTotal, floor.APITotal, med.apiTotal/floor.APITotal), "≤ 1.15×")
	e.note("converge", "API requests per bucket beyond the floor", describeBeyond(beyondFloor(med.apiReqs, floor.API, e.n)), "")
	e.note("converge", "Events per bucket by reason", describePerBucket(med.events, e.n), "")
	e.note("converge", "manager CPU, peak RSS", fmt.Sprintf("%.1f CPU-s, %.0f MiB", med.cpu, med.peak/(1<<20)), "")
	e.note("converge", "CPU-s ours (manager) / floor (its loop)", fmt.Sprintf("%.1f / %.1f", med.cpu, floor.CPUSeconds), "")
	return e.writeResult("converge", map[string]any{
		"n": e.n, "rounds": roundRatios, "seconds": med.seconds, "floorSeconds": floor.Seconds, "ratio": med.ratio(),
		"apiRequests": med.apiReqs, "apiRequestsTotal": med.apiTotal, "floorApiRequests": floor.API, "floorApiRequestsTotal": floor.APITotal,
		"s3Requests": med.s3, "floorS3Requests": floor.S3,
		"managerCPUSeconds": med.cpu, "floorCPUSeconds": floor.CPUSeconds, "managerRSSBytes": med.rss, "managerPeakRSSBytes": med.peak,
		"eventsByReason": med.events, "apiRequestsPerBucketBeyondFloor": beyondFloor(med.apiReqs, floor.API, e.n),
	})
}

// convergeRound measures ours on namespace converge[-<i+1>], then the floor on
// floor[-<i+1>]. The first round also saves the manager's CPU profile.
func (e *env) convergeRound(i int) (*convergeRound, error) {
	ns, floorNS := "converge", "floor"
	if i > 0 {
		ns, floorNS = fmt.Sprintf("converge-%d", i+1), fmt.Sprintf("floor-%d", i+1)
	}
	m, err := e.namespaceWithManager(ns)
	if err != nil {
		return nil, err
	}
	defer m.stop()
	before, _ := m.scrape()
	api := e.apiStart()
	cpu0 := m.cpuSeconds()
	start := time.Now()
	// Where the CPU goes while the buckets converge:
	// `go tool pprof -top bench/results/converge-cpu.pb.gz`.
	profiled := make(chan error, 1)
	if i == 0 {
		go func() { profiled <- m.saveCPUProfile(filepath.Join(e.results, "converge-cpu.pb.gz"), 15*time.Second) }()
	} else {
		profiled <- nil
	}
	if err := e.createBuckets(ns, ns, e.n, 5*time.Minute); err != nil {
		return nil, err
	}
	if err := e.waitAll(ns, bkv1.ConditionReady, e.n, 30*time.Minute); err != nil {
		return nil, err
	}
	r := &convergeRound{seconds: time.Since(start).Seconds()}
	if err := <-profiled; err != nil {
		return nil, fmt.Errorf("CPU profile: %w", err)
	}
	// The recorder sends Events after the status writes they announce: counted once
	// they have all arrived, and the requests with them.
	if r.events, err = e.eventReasons(ns); err != nil {
		return nil, err
	}
	after, _ := m.scrape()
	r.apiReqs, r.apiTotal = e.apiSince(api)
	// The floor creates its StorageBuckets itself; here the harness does, and its
	// requests are subtracted. Counted back in, both sides do the same job.
	r.apiReqs["POST storagebuckets"] += float64(e.n)
	r.apiTotal += float64(e.n)
	r.s3 = diff(e.s3Ops(after), e.s3Ops(before))
	r.cpu = m.cpuSeconds() - cpu0
	r.rss, r.peak = m.rss()
	m.stop()

	if r.floor, err = e.floor(floorNS, e.n); err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	return r, nil
}
