package testenv

import "sync"

// RequestLog counts the S3 requests a manager sends, by store and operation: give
// Observe as operator.Options.S3Observer. A test proves that a refusal sent nothing
// with the difference of two snapshots.
type RequestLog struct {
	mu     sync.Mutex
	counts map[string]map[string]int
}

// Observe counts one request to store.
func (l *RequestLog) Observe(store, op string, _ int, _ error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[string]map[string]int{}
	}
	if l.counts[store] == nil {
		l.counts[store] = map[string]int{}
	}
	l.counts[store][op]++
}

// Snapshot returns the counts of one store so far, by operation.
func (l *RequestLog) Snapshot(store string) map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for op, n := range l.counts[store] {
		out[op] = n
	}
	return out
}
