package receiver

import (
	"crypto/sha256"
	"sync"
	"time"
)

const (
	// MaxRemembered bounds the signatures the replay guard holds. Accepted requests are
	// bounded by the rate limit (by default 40 + 20/s over a validity window of at most
	// 10 minutes: about 12,000), so the cap is only reached with a much higher limit;
	// then requests are refused with 429 rather than accepted unguarded.
	MaxRemembered = 1 << 16

	// replaySweepEvery is how often expired signatures are dropped from the guard.
	replaySweepEvery = 30 * time.Second
)

type claimResult int

const (
	claimed claimResult = iota
	replayed
	guardFull
)

// replayGuard remembers the MAC of every request that is being or was acted on until
// its timestamp stops being fresh, so a captured request replayed within its validity
// window triggers nothing. The MAC is the key, not the header text: hex is
// case-insensitive, and an upper-cased copy of a signature must count as the same one.
// Lookups happen only after the signature was verified in constant time, so the map's
// timing reveals nothing a forger could use.
type replayGuard struct {
	mu        sync.Mutex
	seen      map[[sha256.Size]byte]time.Time // MAC → when its timestamp stops being fresh
	lastSweep time.Time
}

// claim reserves mac until expires: claimed if it was not held, replayed if it is
// (still fresh), guardFull if there is no room even after dropping expired entries.
func (g *replayGuard) claim(mac []byte, expires, now time.Time) claimResult {
	key := [sha256.Size]byte(mac)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[[sha256.Size]byte]time.Time{}
	}
	if now.Sub(g.lastSweep) >= replaySweepEvery || len(g.seen) >= MaxRemembered {
		g.sweepLocked(now)
	}
	if exp, ok := g.seen[key]; ok && now.Before(exp) {
		return replayed
	}
	if len(g.seen) >= MaxRemembered {
		return guardFull
	}
	g.seen[key] = expires
	return claimed
}

// release forgets mac again: a request that triggered nothing (refused, rate limited,
// failed) may be sent again unchanged, as clients retry.
func (g *replayGuard) release(mac []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.seen, [sha256.Size]byte(mac))
}

func (g *replayGuard) sweepLocked(now time.Time) {
	for k, exp := range g.seen {
		if !now.Before(exp) {
			delete(g.seen, k)
		}
	}
	g.lastSweep = now
}

func (g *replayGuard) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.seen)
}
