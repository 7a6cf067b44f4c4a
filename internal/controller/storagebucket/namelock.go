package storagebucket

import (
	"sync"

	"github.com/bucketkeeper/bucketkeeper/internal/memo"
)

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
	locks memo.Map[string, *nameLock]
}

type nameLock struct {
	sync.Mutex
	users int // holders and waiters, counted under the map's lock; the entry goes when none is left
}

// lock takes the lock of key and returns its release.
func (l *nameLocks) lock(key string) (unlock func()) {
	e := l.locks.Update(key, func(e *nameLock, ok bool) (*nameLock, bool) {
		if !ok {
			e = &nameLock{}
		}
		e.users++
		return e, true
	})
	e.Lock()
	return func() {
		e.Unlock()
		l.locks.Update(key, func(e *nameLock, _ bool) (*nameLock, bool) {
			e.users--
			return e, e.users > 0
		})
	}
}
