package mover

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"sync"
)

// equivalences record the objects whose ETag on the target differs from the source's
// by construction, although the bytes are the same: an object the mover laid out in
// parts of its own (a single-part one above StreamLimit, a multipart one whose part
// sizes the source does not tell), whose target ETag is the MD5 of other parts' MD5s.
// A record is made only after every part's bytes were checked (the target's part
// ETag against the MD5 the mover computed while streaming it), and says: the target
// object with this ETag holds the source object with that key, ETag and size.
//
// A record is 16 bytes (two truncated SHA-256 sums), so a checkpoint holds tens of
// thousands; records nothing consulted during a whole pass are dropped at its end.
type equivalences struct {
	mu   sync.Mutex
	m    map[uint64]uint64
	used map[uint64]bool
}

// MaxEquivalences bounds the records of one shard, so its checkpoint stays far within
// a ConfigMap's 1 MiB: a shard needing more (that many large objects copied in parts
// of the mover's own) fails with a message asking for more shards.
const MaxEquivalences = 40000

func newEquivalences() *equivalences {
	return &equivalences{m: map[uint64]uint64{}, used: map[uint64]bool{}}
}

func sum64(parts ...string) uint64 {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{':'})
		h.Write([]byte(p))
	}
	return binary.BigEndian.Uint64(h.Sum(nil))
}

func equivalenceKey(key, sourceETag string, size int64) uint64 {
	return sum64(key, sourceETag, strconv.FormatInt(size, 10))
}

// add records that the target's object of targetETag holds the source's object.
func (e *equivalences) add(key, sourceETag string, size int64, targetETag string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := equivalenceKey(key, sourceETag, size)
	if _, ok := e.m[k]; !ok && len(e.m) >= MaxEquivalences {
		return &equivalencesFull{fmt.Errorf("the shard holds %d objects copied in parts of the mover's own (their ETags differ from the source's), "+
			"the most one checkpoint records: split the move into more shards", MaxEquivalences)}
	}
	e.m[k] = sum64(targetETag)
	e.used[k] = true
	return nil
}

// equal says whether a record makes the target's object equal to the source's.
func (e *equivalences) equal(key, sourceETag string, size int64, targetETag string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := equivalenceKey(key, sourceETag, size)
	v, ok := e.m[k]
	if ok && v == sum64(targetETag) {
		e.used[k] = true
		return true
	}
	return false
}

// prune drops the records nothing used since the last prune (a whole pass).
func (e *equivalences) prune() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.m {
		if !e.used[k] {
			delete(e.m, k)
		}
	}
	e.used = map[uint64]bool{}
}

func (e *equivalences) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.m)
}

// marshal is the records as sorted 16-byte pairs.
func (e *equivalences) marshal() []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	keys := make([]uint64, 0, len(e.m))
	for k := range e.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]byte, 0, 16*len(keys))
	for _, k := range keys {
		out = binary.BigEndian.AppendUint64(out, k)
		out = binary.BigEndian.AppendUint64(out, e.m[k])
	}
	return out
}

func unmarshalEquivalences(b []byte) (*equivalences, error) {
	if len(b)%16 != 0 {
		return nil, fmt.Errorf("equivalences of %d bytes, not a multiple of 16", len(b))
	}
	e := newEquivalences()
	for i := 0; i < len(b); i += 16 {
		e.m[binary.BigEndian.Uint64(b[i:])] = binary.BigEndian.Uint64(b[i+8:])
	}
	return e, nil
}
