package probe

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// testKey returns a distinct, realistic-looking key for index i.
func testKey(i int) types.NamespacedName {
	return types.NamespacedName{Namespace: fmt.Sprintf("team-%d", i%17), Name: fmt.Sprintf("bucket-%05d", i)}
}

func TestPhaseInRangeAndDeterministic(t *testing.T) {
	for _, iv := range []time.Duration{time.Nanosecond, time.Second, 60 * time.Second, 7*time.Minute + 3} {
		for i := range 1000 {
			k := testKey(i)
			p := Phase(k, iv)
			if p < 0 || p >= iv {
				t.Fatalf("Phase(%v, %v) = %v, want in [0, %v)", k, iv, p, iv)
			}
			if p2 := Phase(k, iv); p2 != p {
				t.Fatalf("Phase not deterministic: %v vs %v", p, p2)
			}
		}
	}
	if p := Phase(testKey(1), 0); p != 0 {
		t.Fatalf("Phase with interval 0 = %v, want 0", p)
	}
	// "a/bc" and "ab/c" must not collide by construction.
	if Phase(types.NamespacedName{Namespace: "a", Name: "bc"}, time.Hour) ==
		Phase(types.NamespacedName{Namespace: "ab", Name: "c"}, time.Hour) {
		t.Fatal("namespace/name separator is not part of the hash")
	}
}

func TestPhaseUniform(t *testing.T) {
	const n, iv = 10000, 60 * time.Second
	var tenths [10]int
	for i := range n {
		tenths[Phase(testKey(i), iv)*10/iv]++
	}
	for i, c := range tenths {
		frac := float64(c) / n
		if frac < 0.07 || frac > 0.13 {
			t.Errorf("tenth %d holds %.1f%% of phases, want 7%%..13%%", i, 100*frac)
		}
	}
	t.Logf("phase distribution over tenths: %v", tenths)
}

func TestNextSlotDeterministicWithoutJitter(t *testing.T) {
	const iv = 60 * time.Second
	after := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	for i := range 1000 {
		k := testKey(i)
		a := NextSlot(k, iv, after, 0.1, nil)
		if b := NextSlot(k, iv, after, 0.1, nil); !a.Equal(b) {
			t.Fatalf("not deterministic: %v vs %v", a, b)
		}
		// On the key's grid: epoch + k*interval + Phase(key).
		if off := time.Duration(a.UnixNano() % int64(iv)); off != Phase(k, iv) {
			t.Fatalf("%v: slot offset %v, want phase %v", k, off, Phase(k, iv))
		}
		// Calling again with the slot itself gives the next grid point.
		if next := NextSlot(k, iv, a, 0, nil); next.Sub(a) != iv {
			t.Fatalf("%v: consecutive slots %v apart, want %v", k, next.Sub(a), iv)
		}
	}
}

func TestNextSlotBounds(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, iv := range []time.Duration{time.Second, 60 * time.Second, time.Hour + 1} {
		for _, jf := range []float64{0, 0.1, 0.25} {
			for i := range 5000 {
				k := testKey(i)
				after := base.Add(time.Duration(rng.Int63n(int64(1000 * time.Hour))))
				var rnd func() float64
				if jf > 0 {
					rnd = rng.Float64
				}
				got := NextSlot(k, iv, after, jf, rnd)
				if !got.After(after) {
					t.Fatalf("slot %v not strictly after %v", got, after)
				}
				if got.Sub(after) < iv/2 {
					t.Fatalf("iv=%v jf=%v: slot only %v after `after`, want >= %v", iv, jf, got.Sub(after), iv/2)
				}
				if maxDist := iv/2 + iv + time.Duration(2*jf*float64(iv)) + 1; got.Sub(after) >= maxDist {
					t.Fatalf("iv=%v jf=%v: slot %v after `after`, want < %v", iv, jf, got.Sub(after), maxDist)
				}
				// The jitter only shifts the grid point chosen for rnd() = 0.5.
				if jf > 0 {
					mid := NextSlot(k, iv, after, jf, func() float64 { return 0.5 })
					if d := got.Sub(mid); d > time.Duration(jf*float64(iv))+1 || d < -time.Duration(jf*float64(iv))-1 {
						t.Fatalf("iv=%v jf=%v: jitter moved the slot by %v (changed grid point)", iv, jf, d)
					}
				}
				// Distance to the key's un-jittered grid is within the jitter.
				d := (got.UnixNano() - int64(Phase(k, iv))) % int64(iv)
				if d < 0 {
					d += int64(iv)
				}
				if d > int64(iv)/2 {
					d -= int64(iv)
				}
				if lim := jf * float64(iv); float64(d) > lim+1 || float64(d) < -lim-1 {
					t.Fatalf("iv=%v jf=%v: jitter %v exceeds ±%v", iv, jf, time.Duration(d), time.Duration(lim))
				}
			}
		}
	}
	if got := NextSlot(testKey(1), 0, base, 0.1, nil); !got.Equal(base) {
		t.Fatalf("interval 0: got %v, want `after` unchanged", got)
	}
}
