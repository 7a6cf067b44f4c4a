package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMoveLastProgress: the progress time moves only when a move's figures change, so
// a move read again and again with the same figures (its mover stuck, its objects
// refused) shows a time that stands still; the series goes with the move.
func TestMoveLastProgress(t *testing.T) {
	clock := time.Unix(1000, 0)
	now = func() time.Time { return clock }
	t.Cleanup(func() { now = time.Now; EndMove("ns", "m", nil) })
	last := func() float64 { return testutil.ToFloat64(MoveLastProgress.WithLabelValues("ns", "m")) }

	SetMoveProgress("ns", "m", 0, 0, 0) // the plan pass starts
	if got := last(); got != 1000 {
		t.Fatalf("first progress at %v, want 1000", got)
	}
	clock = clock.Add(time.Minute)
	SetMoveProgress("ns", "m", 10, 1, 99)
	clock = clock.Add(time.Hour)
	SetMoveProgress("ns", "m", 10, 1, 99) // read again, nothing copied
	if got := last(); got != 1060 {
		t.Fatalf("progress at %v after a read without progress, want 1060", got)
	}
	SetMoveProgress("ns", "m", 10, 1, 98)
	if got := last(); got != 4660 {
		t.Fatalf("progress at %v after objects left changed, want 4660", got)
	}
	EndMove("ns", "m", nil)
	if n := testutil.CollectAndCount(MoveLastProgress); n != 0 {
		t.Fatalf("%d series after the move ended", n)
	}
	SetMoveProgress("ns", "m", 10, 1, 98) // a new move with the same figures is progress
	if got := last(); got != 4660 {
		t.Fatalf("a new move's first progress at %v, want 4660", got)
	}
}

// TestAccessReady: one series per access, 1 or 0, gone with the access.
func TestAccessReady(t *testing.T) {
	yes, no := true, false
	SetAccessReady("ns", "a", &no)
	SetAccessReady("ns", "b", &yes)
	if got := testutil.ToFloat64(BucketAccessReady.WithLabelValues("ns", "a")); got != 0 {
		t.Fatalf("not ready access shows %v", got)
	}
	SetAccessReady("ns", "a", &yes)
	SetAccessReady("ns", "b", nil)
	if n := testutil.CollectAndCount(BucketAccessReady); n != 1 {
		t.Fatalf("%d series, want the one access left", n)
	}
	SetAccessReady("ns", "a", nil)
}
