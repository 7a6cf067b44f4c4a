package memo

import (
	"sync"
	"testing"
)

func TestMapZeroValueAndUpdate(t *testing.T) {
	var m Map[string, int]
	if _, ok := m.Get("a"); ok || m.Len() != 0 || m.Has("a") || m.Delete("a") {
		t.Fatal("the zero Map is not empty")
	}
	m.Set("a", 1)
	if v, ok := m.Get("a"); !ok || v != 1 || !m.Has("a") {
		t.Fatalf("Get(a) = %d, %v after Set", v, ok)
	}
	got := m.Update("a", func(v int, ok bool) (int, bool) { return v + 1, ok })
	if v, _ := m.Get("a"); got != 2 || v != 2 {
		t.Errorf("Update returned %d, stored %d; want 2", got, v)
	}
	m.Update("b", func(v int, ok bool) (int, bool) { return 7, false })
	if m.Has("b") {
		t.Error("an Update that does not keep stored a value")
	}
	m.Update("a", func(int, bool) (int, bool) { return 0, false })
	if m.Has("a") || m.Len() != 0 {
		t.Error("an Update that does not keep left the old value")
	}
	m.Set("x", 1)
	m.Set("y", 2)
	m.DeleteFunc(func(_ string, v int) bool { return v > 1 })
	if !m.Has("x") || m.Has("y") || !m.Delete("x") || m.Len() != 0 {
		t.Error("DeleteFunc or Delete dropped the wrong keys")
	}
}

// TestMapUpdateIsOneStep: concurrent read-modify-writes of one key lose none (run with
// -race, as make test does).
func TestMapUpdateIsOneStep(t *testing.T) {
	var m Map[int, int]
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				m.Update(0, func(v int, _ bool) (int, bool) { return v + 1, true })
			}
		}()
	}
	wg.Wait()
	if v, _ := m.Get(0); v != 8000 {
		t.Errorf("8 x 1000 increments gave %d", v)
	}
}
