package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// The move scenario's bucket: many small objects and a few large ones, as the issue
// sets it.
const (
	moveSmall      = 10000
	moveSmallSize  = 16 << 10
	moveLarge      = 20
	moveLargeSize  = 64 << 20
	moveLargePart  = 8 << 20 // what the aws CLI uploads 64 MiB in
	moveWorkers    = 8       // rclone's --transfers and --checkers, the mover's concurrency
	moveShards     = 4
	moveDelta      = 100 // changes before each measured final pass
	moveFinalRuns  = 5
	moveRGWMemory  = 3 << 30
	moveSourceName = "move-source"
)

// moveRun is one tool's copy of the whole bucket.
type moveRun struct {
	Seconds          float64 `json:"seconds"`
	Objects          int64   `json:"objects"`
	Bytes            int64   `json:"bytes"`
	ObjectsPerSecond float64 `json:"objectsPerSecond"`
	MiBPerSecond     float64 `json:"mibPerSecond"`
	PeakRSSBytes     float64 `json:"peakRSSBytes"`
	// PlanSeconds is the plan pass a sharded move runs first (not in Seconds).
	PlanSeconds float64 `json:"planSeconds,omitempty"`
	// WrittenBytes is what the mover sent the target (its checkpoints).
	WrittenBytes int64 `json:"writtenBytes,omitempty"`
}

// move: the bucket moves from SeaweedFS to Ceph RGW, by Debian's `rclone sync`, by one
// mover and by four (the shards of an Indexed Job, as processes side by side), with
// the same concurrency, in one run. Then, five times, 100 changes are made on the
// source and a final pass (copy, then the verifying listing) runs: the write pause of
// a cutover, which stops the source's writes for exactly that pass.
func (e *env) move() error {
	rclone, err := rcloneBinary()
	if err != nil {
		return err
	}
	fmt.Println("   starting Ceph RGW")
	rgw, err := testenv.StartS3With(testenv.RGW, testenv.S3Options{RGWMemoryBytes: moveRGWMemory})
	if err != nil {
		return err
	}
	defer rgw.Close()
	ctx := context.Background()
	src := storeBucket{srv: e.s3, bucket: moveSourceName}
	begin := time.Now()
	if err := src.fill(ctx); err != nil {
		return fmt.Errorf("filling the source: %w", err)
	}
	objects, bytes := int64(moveSmall+moveLarge), int64(moveSmall*moveSmallSize+moveLarge*moveLargeSize)
	fmt.Printf("   source: %d objects, %.0f MiB written in %s\n", objects, float64(bytes)/(1<<20), time.Since(begin).Round(time.Second))

	results := map[string]*moveRun{}
	var idle *moveRun
	var pauses []float64
	// rclone first, then one mover, then four: each into a bucket of its own, emptied
	// (and RGW's garbage collected) before the next.
	err = into(ctx, rgw, "move-rclone", func(tgt storeBucket) error {
		var err error
		results["rclone"], err = runRclone(rclone, e.dir, src, tgt)
		return err
	})
	if err == nil {
		err = into(ctx, rgw, "move-one", func(tgt storeBucket) error {
			m := e.newMoverRuns(src, tgt, "bench-one")
			var err error
			if results["mover"], err = m.copyAll(ctx, 1); err != nil {
				return err
			}
			if idle, err = m.pass(ctx, mover.ModeVerify, 0); err != nil {
				return err
			}
			pauses, err = m.finalPasses(ctx, src)
			return err
		})
	}
	if err == nil {
		err = into(ctx, rgw, "move-four", func(tgt storeBucket) error {
			var err error
			results["mover4"], err = e.newMoverRuns(src, tgt, "bench-four").copyAll(ctx, moveShards)
			return err
		})
	}
	if err != nil {
		return err
	}

	r, one, four := results["rclone"], results["mover"], results["mover4"]
	for _, name := range []string{"rclone", "mover", "mover4"} {
		x := results[name]
		fmt.Printf("   %-7s %6.1fs  %7.1f objects/s  %6.1f MiB/s  peak RSS %.1f MiB\n", name, x.Seconds, x.ObjectsPerSecond, x.MiBPerSecond, x.PeakRSSBytes/(1<<20))
	}
	slices.Sort(pauses)
	e.note("move", "objects/s: one mover / rclone sync", fmt.Sprintf("%.0f / %.0f = %.2f×", one.ObjectsPerSecond, r.ObjectsPerSecond, one.ObjectsPerSecond/r.ObjectsPerSecond), "≥ 1.0× (8 transfers each)")
	e.note("move", "MiB/s: one mover / rclone sync", fmt.Sprintf("%.1f / %.1f = %.2f×", one.MiBPerSecond, r.MiBPerSecond, one.MiBPerSecond/r.MiBPerSecond), "≥ 1.0×")
	e.note("move", "4 shards / 1 mover (time: copy; plan)", fmt.Sprintf("%.2f× (%.0fs vs %.0fs; plan %.1fs)", one.Seconds/four.Seconds, four.Seconds, one.Seconds, four.PlanSeconds), "as far as 2 cores go")
	e.note("move", "mover peak RSS: copying / listing only", fmt.Sprintf("%.1f / %.1f MiB (+%.1f)", one.PeakRSSBytes/(1<<20), idle.PeakRSSBytes/(1<<20), (one.PeakRSSBytes-idle.PeakRSSBytes)/(1<<20)), "≤ +64 MiB")
	e.note("move", "rclone sync peak RSS", fmt.Sprintf("%.1f MiB", r.PeakRSSBytes/(1<<20)), "")
	e.note("move", "bytes sent to the target / bucket size", fmt.Sprintf("%.3f", float64(one.WrittenBytes)/float64(bytes)), "")
	e.note("move", fmt.Sprintf("write pause: final pass after %d changes, p50 / max", moveDelta),
		fmt.Sprintf("%.2fs / %.2fs (%d runs)", percentile(pauses, 0.5), pauses[len(pauses)-1], len(pauses)), "< 10s")
	return e.writeResult("move", map[string]any{
		"objects": objects, "bytes": bytes, "workers": moveWorkers, "shards": moveShards,
		"rclone": r, "mover": one, "mover4": four, "moverListingOnly": idle,
		"finalPassSeconds": pauses, "finalPassChanges": moveDelta,
		"rcloneVersion": rcloneVersion(rclone),
	})
}

// into runs copy into a new bucket of the target store, and empties and deletes the
// bucket after it.
func into(ctx context.Context, srv *testenv.S3Server, name string, copy func(storeBucket) error) error {
	tgt := storeBucket{srv: srv, bucket: name}
	if err := tgt.create(ctx); err != nil {
		return err
	}
	if err := copy(tgt); err != nil {
		return err
	}
	return tgt.destroy(ctx)
}

// finalPasses makes moveDelta changes on the source and runs a final pass, moveFinalRuns
// times, and returns each pass's time (the mover process's start to its exit).
func (m *moverRuns) finalPasses(ctx context.Context, src storeBucket) ([]float64, error) {
	var pauses []float64
	for round := range moveFinalRuns {
		if err := src.change(ctx, round, moveDelta); err != nil {
			return nil, err
		}
		run, err := m.pass(ctx, mover.ModeFinal, 0)
		if err != nil {
			return nil, err
		}
		if !m.last.Verified || m.last.Counts.Changes() != moveDelta {
			return nil, fmt.Errorf("final pass %d: verified %v after %d changes, want %d", m.specs.Pass, m.last.Verified, m.last.Counts.Changes(), moveDelta)
		}
		pauses = append(pauses, math.Round(run.Seconds*100)/100)
	}
	return pauses, nil
}
