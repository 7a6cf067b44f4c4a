package storagebucket

import (
	"sync"
	"testing"
)

// TestNameLocksSerialiseOneName: holders of one key run one at a time, other keys are
// not held up, and no entry outlives its last holder.
func TestNameLocksSerialiseOneName(t *testing.T) {
	var l nameLocks
	unlockOther := l.lock("s\x00other")
	var wg sync.WaitGroup
	inside, maxInside := 0, 0
	var mu sync.Mutex
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := l.lock("s\x00b")
			defer unlock()
			mu.Lock()
			inside++
			maxInside = max(maxInside, inside)
			mu.Unlock()
			mu.Lock()
			inside--
			mu.Unlock()
		}()
	}
	wg.Wait() // "other" is still held: it held no one up
	if maxInside != 1 {
		t.Errorf("%d holders at once, want 1", maxInside)
	}
	unlockOther()
	if n := l.size(); n != 0 {
		t.Errorf("%d entries left", n)
	}
}

// size is how many keys are held or waited for.
func (l *nameLocks) size() int { return l.locks.Len() }
