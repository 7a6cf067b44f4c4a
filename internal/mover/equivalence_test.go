package mover

import (
	"errors"
	"fmt"
	"testing"
)

func TestEquivalencesRoundTripAndPrune(t *testing.T) {
	e := newEquivalences()
	if err := e.add("a", "src-2", 10, "tgt-3"); err != nil {
		t.Fatal(err)
	}
	if err := e.add("b", "src", 5, "tgt"); err != nil {
		t.Fatal(err)
	}
	back, err := unmarshalEquivalences(e.marshal())
	if err != nil {
		t.Fatal(err)
	}
	if !back.equal("a", "src-2", 10, "tgt-3") {
		t.Error("record lost in the round trip")
	}
	for _, c := range []struct {
		key, src string
		size     int64
		tgt      string
	}{{"a", "src-2", 11, "tgt-3"}, {"a", "src-9", 10, "tgt-3"}, {"a", "src-2", 10, "tgt-4"}, {"c", "src-2", 10, "tgt-3"}} {
		if back.equal(c.key, c.src, c.size, c.tgt) {
			t.Errorf("%v counts as equivalent", c)
		}
	}
	back.prune() // only "a" was consulted since the load
	if back.len() != 1 || !back.equal("a", "src-2", 10, "tgt-3") {
		t.Errorf("prune kept %d records, want the one consulted", back.len())
	}
	if _, err := unmarshalEquivalences(make([]byte, 17)); err == nil {
		t.Error("a truncated record was accepted")
	}
}

func TestEquivalencesAreBounded(t *testing.T) {
	e := newEquivalences()
	for i := range MaxEquivalences {
		if err := e.add(fmt.Sprint(i), "s", 1, "t"); err != nil {
			t.Fatal(err)
		}
	}
	err := e.add("one-more", "s", 1, "t")
	var full *equivalencesFull
	if !errors.As(err, &full) || !fatal(err) {
		t.Fatalf("record past the bound: %v, want a fatal equivalencesFull", err)
	}
	if err := e.add("0", "s", 1, "t2"); err != nil {
		t.Fatalf("replacing a record at the bound: %v", err)
	}
}
