package mover

import "sync"

// tracker turns the completion of a pass's keys, which finish out of order (a large
// object copies while hundreds of small ones after it are done), into the cursor a
// resumed pass starts after: the last key up to which every key is done.
//
// Its memory is bounded by the keys in flight, not by the keys done: a run of done
// keys behind an unfinished one is kept as its last key alone.
type tracker struct {
	mu     sync.Mutex
	queue  []trackItem // in key order; queue[head:] are live
	head   int
	cursor string
	nextID uint64
}

type trackItem struct {
	id   uint64
	key  string
	done bool
}

// newTracker starts after cursor (a resumed pass's).
func newTracker(cursor string) *tracker { return &tracker{cursor: cursor} }

// add enters key (after every key added before) and returns its ticket for finish. A
// key that needs no work is added done.
func (t *tracker) add(key string, done bool) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nextID++
	if done {
		if n := len(t.queue); n > t.head && t.queue[n-1].done {
			t.queue[n-1].key = key // extend the run of done keys
			t.advance()
			return t.nextID
		}
	}
	t.queue = append(t.queue, trackItem{id: t.nextID, key: key, done: done})
	t.advance()
	return t.nextID
}

// finish marks the key of ticket id done.
func (t *tracker) finish(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := t.head; i < len(t.queue); i++ {
		if t.queue[i].id == id {
			t.queue[i].done = true
			break
		}
	}
	t.advance()
}

// advance moves the cursor past the done keys at the front.
func (t *tracker) advance() {
	for t.head < len(t.queue) && t.queue[t.head].done {
		t.cursor = t.queue[t.head].key
		t.head++
	}
	if t.head > 64 && t.head*2 > len(t.queue) {
		t.queue = append(t.queue[:0], t.queue[t.head:]...)
		t.head = 0
	}
}

// position is the cursor: every key up to and including it is done.
func (t *tracker) position() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cursor
}

// inFlight is how many keys are not done yet.
func (t *tracker) inFlight() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, it := range t.queue[t.head:] {
		if !it.done {
			n++
		}
	}
	return n
}
