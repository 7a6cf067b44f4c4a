package mover

import "testing"

func TestTrackerCursorWaitsForTheSlowestKey(t *testing.T) {
	tr := newTracker("a")
	slow := tr.add("b", false)
	for _, k := range []string{"c", "d", "e"} {
		tr.add(k, true)
	}
	fast := tr.add("f", false)
	tr.add("g", true)
	if got := tr.position(); got != "a" {
		t.Fatalf("cursor %q before the first key is done, want the starting cursor", got)
	}
	tr.finish(fast)
	if got := tr.position(); got != "a" {
		t.Fatalf("cursor %q while b is in flight, want a", got)
	}
	tr.finish(slow)
	if got := tr.position(); got != "g" {
		t.Fatalf("cursor %q once every key is done, want g", got)
	}
	if n := tr.inFlight(); n != 0 {
		t.Errorf("%d keys in flight, want 0", n)
	}
}

func TestTrackerMemoryIsBoundedByKeysInFlight(t *testing.T) {
	tr := newTracker("")
	slow := tr.add("k000000", false)
	for i := 1; i < 100000; i++ {
		tr.add(keyOf(i), true)
	}
	if n := len(tr.queue) - tr.head; n > 2 {
		t.Fatalf("tracker holds %d entries behind one key in flight, want at most 2", n)
	}
	tr.finish(slow)
	if got := tr.position(); got != keyOf(99999) {
		t.Fatalf("cursor %q, want the last key", got)
	}
}

func keyOf(i int) string {
	const digits = "0123456789"
	b := []byte("k000000")
	for p := len(b) - 1; i > 0; p-- {
		b[p] = digits[i%10]
		i /= 10
	}
	return string(b)
}
