package memo

import (
	"errors"
	"testing"
)

func TestVersionedBuildsOncePerVersion(t *testing.T) {
	var c Versioned[string, int]
	builds := 0
	build := func(v int) func() (int, error) {
		return func() (int, error) { builds++; return v, nil }
	}
	for range 3 {
		if v, err := c.Get("store", "gen1", build(1)); err != nil || v != 1 {
			t.Fatalf("Get(gen1) = %d, %v", v, err)
		}
	}
	if builds != 1 {
		t.Errorf("three Gets of one version built %d times", builds)
	}
	if v, _ := c.Get("store", "gen2", build(2)); v != 2 || builds != 2 {
		t.Errorf("a new version gave %d after %d builds; want 2 after 2", v, builds)
	}
	boom := errors.New("bad credentials")
	if _, err := c.Get("store", "gen3", func() (int, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Errorf("a failed build returned %v", err)
	}
	if v, _ := c.Get("store", "gen2", build(9)); v != 2 || builds != 2 {
		t.Errorf("a failed build replaced the kept value: %d after %d builds", v, builds)
	}
	if v, ok := c.Current("store"); !ok || v != 2 {
		t.Errorf("Current = %d, %v; want the kept 2", v, ok)
	}
	c.Forget("store")
	if _, ok := c.Current("store"); ok {
		t.Error("Current after Forget found a value")
	}
	if v, _ := c.Get("store", "gen2", build(5)); v != 5 || builds != 3 {
		t.Errorf("after Forget: %d after %d builds; want a fresh build", v, builds)
	}
}
