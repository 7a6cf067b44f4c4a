package mover

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	t0 := time.Unix(1000, 0)
	done := t0.Add(10 * time.Second)
	cps := []*Checkpoint{
		{Shard: PlanShard, Pass: 1, Mode: ModePlan, Phase: PhaseDone, Plan: &Plan{Objects: 30, Bytes: 3000}},
		{Shard: 0, Pass: 2, Mode: ModeFinal, Phase: PhaseDone, Verified: true, Started: t0, Updated: done, Finished: &done,
			Counts: Counts{CopiedObjects: 10, CopiedBytes: 1000, ListedBytes: 1000}},
		{Shard: 1, Pass: 2, Mode: ModeFinal, Phase: PhaseCopying, Started: t0, Updated: t0.Add(5 * time.Second), LastError: "source: unreachable",
			Counts:   Counts{CopiedObjects: 5, CopiedBytes: 500, ListedBytes: 600},
			Failures: Failures{Count: 1, First: []Failure{{Key: "x", Reason: "source: AccessDenied"}}}},
		{Shard: 2, Pass: 1, Mode: ModeCopy, Phase: PhaseDone},
	}
	p := Summarize(cps, 2, 3, t0.Add(20*time.Second))
	if p.Done != 1 || p.Verified || p.Counts.CopiedObjects != 15 || p.Failures.Count != 1 || len(p.Errors) != 1 {
		t.Fatalf("summary %+v", p)
	}
	if p.BytesPerSecond != 75 { // 1500 bytes in 20 s
		t.Errorf("rate %v, want 75", p.BytesPerSecond)
	}
	if p.Remaining != 20*time.Second { // 3000 planned - 1500 copied at 75/s
		t.Errorf("remaining %v, want 20s", p.Remaining)
	}
	cps[2].Phase, cps[2].Verified = PhaseDone, true
	cps = append(cps, &Checkpoint{Shard: 2, Pass: 2, Mode: ModeFinal, Phase: PhaseDone, Verified: true})
	cps = append(cps[:3], cps[4])
	if p := Summarize(cps, 2, 3, t0); !p.Verified || p.Done != 3 {
		t.Fatalf("all shards verified: %+v", p)
	}
	if p := Summarize(cps, 2, 4, t0); p.Verified {
		t.Fatal("verified with a shard missing")
	}
}
