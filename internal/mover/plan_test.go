package mover

import (
	"fmt"
	"testing"
)

func TestSamplerBoundariesSplitWorkEvenly(t *testing.T) {
	var sm sampler
	const n = 100000
	var w int64
	for i := range n {
		w += 1000
		sm.add(fmt.Sprintf("k%06d", i), w)
	}
	if len(sm.points) >= 2*sampleCap {
		t.Fatalf("sampler holds %d points, want fewer than %d", len(sm.points), 2*sampleCap)
	}
	b := sm.boundaries(4, w)
	if len(b) != 3 {
		t.Fatalf("boundaries %v, want 3", b)
	}
	for i, k := range b {
		var idx int
		fmt.Sscanf(k, "k%06d", &idx)
		want := (i + 1) * n / 4
		if d := idx - want; d < -n/100 || d > n/100 {
			t.Errorf("boundary %d at key %d, want within 1%% of %d", i, idx, want)
		}
	}
}

func TestSamplerFewKeys(t *testing.T) {
	var sm sampler
	sm.add("a", 10)
	sm.add("b", 20)
	b := sm.boundaries(8, 20)
	for i := 1; i < len(b); i++ {
		if b[i] <= b[i-1] {
			t.Fatalf("boundaries %v not strictly increasing", b)
		}
	}
	if len(b) > 2 {
		t.Fatalf("boundaries %v: more than the keys", b)
	}
	var empty sampler
	if b := empty.boundaries(4, 0); len(b) != 0 {
		t.Fatalf("boundaries of an empty bucket: %v", b)
	}
}
