package probe

import (
	"hash/fnv"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Phase returns a deterministic offset of key within interval, in [0, interval).
//
// It is FNV-64a of "namespace/name" modulo the interval. Because the hash is
// well mixed, N keys land uniformly over the interval, and because it is
// deterministic, a key keeps its slot across operator restarts and leader
// changes (no re-bunching after a failover). interval <= 0 yields 0.
func Phase(key types.NamespacedName, interval time.Duration) time.Duration {
	if interval <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key.Namespace))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(key.Name))
	return time.Duration(h.Sum64() % uint64(interval))
}

// NextSlot returns the key's next due time after `after`.
//
// The slots of a key form the grid epoch + k*interval + Phase(key) (epoch is
// the Unix epoch, so the grid does not depend on when the process started).
// NextSlot picks the first grid point at least interval/2 + jitterFrac*interval
// after `after` and shifts it by a jitter of ±jitterFrac*interval drawn from
// rnd() in [0,1). rnd == nil means no jitter (and no jitter margin), which
// makes the result a pure function of its inputs. jitterFrac is clamped to
// [0, 0.5).
//
// Consequences:
//   - The result is always at least interval/2 after `after` (hence strictly
//     after it), so a probe that just ran is never repeated soon, and less
//     than after + 1.5*interval + 2*jitterFrac*interval.
//   - The jitter only shifts the chosen grid point, it never decides which
//     point is chosen. Were it to (e.g. "first jittered point >= after +
//     interval/2"), the first wave after an operator restart would end at a
//     hard edge that overlaps the next, jittered wave, producing a ~1.5x load
//     peak; this way consecutive waves' jitter ramps add up to a flat rate.
//   - Re-scheduling from a fire time yields the following grid point, so in
//     steady state each key fires once per interval (±2*jitter).
//
// The jitter breaks up accidental alignment (e.g. keys of stores with equal
// intervals and colliding phases) without losing the uniform spread.
//
// interval <= 0 has no grid; `after` is returned unchanged.
func NextSlot(key types.NamespacedName, interval time.Duration, after time.Time, jitterFrac float64, rnd func() float64) time.Time {
	if interval <= 0 {
		return after
	}
	iv := int64(interval)
	var margin, jitter int64
	if rnd != nil && jitterFrac > 0 {
		jf := min(jitterFrac, 0.499)
		margin = int64(jf * float64(iv))
		// Truncation toward zero keeps |jitter| <= margin.
		jitter = int64((2*rnd() - 1) * jf * float64(iv))
	}
	phase := int64(Phase(key, interval))
	earliest := after.UnixNano() + iv/2 + iv%2 + margin // ceil(interval/2) + margin
	// Smallest k with k*iv + phase >= earliest.
	k := ceilDiv(earliest-phase, iv)
	return time.Unix(0, k*iv+phase+jitter).In(after.Location())
}

// ceilDiv returns ceil(a/b) for b > 0 and any sign of a.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a > 0 {
		q++
	}
	return q
}
