package memo

import "sync"

// Map is a map from K to V safe for concurrent use. The zero value is empty and ready.
type Map[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]V
}

// Get returns the value of k, and whether there is one.
func (m *Map[K, V]) Get(k K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[k]
	return v, ok
}

// Has says whether k has a value.
func (m *Map[K, V]) Has(k K) bool {
	_, ok := m.Get(k)
	return ok
}

// Set gives k the value v.
func (m *Map[K, V]) Set(k K, v V) {
	m.Update(k, func(V, bool) (V, bool) { return v, true })
}

// Delete drops k's value and reports whether there was one.
func (m *Map[K, V]) Delete(k K) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.m[k]
	delete(m.m, k)
	return ok
}

// Update calls f with k's value (the zero value and false when there is none) and
// stores what f returns when f says keep, else drops k; it returns what f returned. f
// runs under the map's lock: a read and the write that depends on it are one step, and f
// must not call the map.
func (m *Map[K, V]) Update(k K, f func(v V, ok bool) (next V, keep bool)) V {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[k]
	next, keep := f(v, ok)
	switch {
	case keep && m.m == nil:
		m.m = map[K]V{k: next}
	case keep:
		m.m[k] = next
	default:
		delete(m.m, k)
	}
	return next
}

// Len is how many keys have a value.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}

// DeleteFunc drops every key for which del returns true; del runs under the lock.
func (m *Map[K, V]) DeleteFunc(del func(K, V) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.m {
		if del(k, v) {
			delete(m.m, k)
		}
	}
}
