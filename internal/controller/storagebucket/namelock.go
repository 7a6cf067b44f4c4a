package storagebucket

import "sync"

// nameLocks serialises, per store endpoint and bucket name, the stretch of a pass from
// "does the bucket exist" to "it carries our ownership tags". Where a store answers a
// repeated CreateBucket by its owner with success (AWS in us-east-1), two claims naming
// the same bucket at the same instant would otherwise both see it missing, both be told
// they created it, and both tag it, the last one winning after the first may already
// have handed out a key. Under the lock the second one finds the bucket, tagged for the
// first, and is refused. It holds within one operator process (the leader); operators of
// other clusters sharing a store are kept apart by their cluster tags, shards of one
// cluster by their disjoint claims.
type nameLocks struct {
	mu    sync.Mutex
	locks map[string]*nameLock
}

type nameLock struct {
	sync.Mutex
	users int // holders and waiters; the entry goes when none is left
}

// lock takes the lock of key and returns its release.
func (l *nameLocks) lock(key string) (unlock func()) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*nameLock{}
	}
	e := l.locks[key]
	if e == nil {
		e = &nameLock{}
		l.locks[key] = e
	}
	e.users++
	l.mu.Unlock()

	e.Lock()
	return func() {
		e.Unlock()
		l.mu.Lock()
		if e.users--; e.users == 0 {
			delete(l.locks, key)
		}
		l.mu.Unlock()
	}
}
