package storagebucket

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
)

// TestBucketSweepIsBoundedAndResumes: a store with more buckets than one pass may read
// the tags of, and more leftovers than one pass may release, is swept over several
// passes within both bounds, each going on after the last bucket the one before judged.
// Every frozen source of a gone claim ends thawed (its freeze alone taken out) and
// released, and so does one already released with its freeze (a Retain that knew
// nothing of the move); every copy a move left behind of a gone claim released and
// still frozen, as a released one stays;
// a live claim's buckets, another cluster's, untagged ones and the home a gone claim
// left unfrozen are not written to. The next sweep reads no live claim's tags again.
func TestBucketSweepIsBoundedAndResumes(t *testing.T) {
	r := newSweepRig(t, claimOfUID("live", uidLive, nil))
	store := r.stores["http://a"]
	kinds := map[string]string{}
	for i := range 2*defaults.MoveSweepMaxBuckets + 5 {
		name := fmt.Sprintf("b-%04d", i)
		kind := []string{"frozen", "leftBehind", "live", "otherCluster", "untagged", "goneHome", "releasedFrozen", "releasedCopy"}[i%8]
		kinds[name] = kind
		switch kind {
		case "frozen":
			store.add(name, ownTags(name, uidGone), frozenPolicy(t, name), "k")
		case "leftBehind":
			tags := ownTags(name, uidGone)
			tags[bkv1.TagMovedTo] = "b/" + name
			store.add(name, tags, frozenPolicy(t, name), "k")
		case "live":
			store.add(name, ownTags("live", uidLive), frozenPolicy(t, name), "k")
		case "otherCluster":
			tags := ownTags(name, uidGone)
			tags[bkv1.TagCluster] = "cluster-b"
			store.add(name, tags, frozenPolicy(t, name), "k")
		case "untagged":
			store.add(name, nil, frozenPolicy(t, name), "k")
		case "goneHome":
			store.add(name, ownTags(name, uidGone), keptStatement, "k")
		case "releasedFrozen": // released by a Retain that knew nothing of the move
			tags := ownTags(name, "")
			store.add(name, tags, frozenPolicy(t, name), "k")
		case "releasedCopy":
			tags := ownTags(name, "")
			tags[bkv1.TagMovedTo] = "b/" + name
			store.add(name, tags, frozenPolicy(t, name), "k")
		}
	}
	storeA := &bkv1.ObjectStore{}
	must(t, r.k8s.Get(r.ctx, objKey("a"), storeA))
	state := r.s.accountSweep("a")
	sweep := func() (passes int) {
		for {
			passes++
			p, err := r.s.bucketPass(r.ctx, storeA, store, state)
			must(t, err)
			if p.judged > defaults.MoveSweepMaxBuckets || p.released > defaults.MoveSweepMaxWrites {
				t.Fatalf("pass %d judged %d and released %d buckets, beyond its bounds", passes, p.judged, p.released)
			}
			if p.done {
				return passes
			}
			if passes > 50 {
				t.Fatal("the sweep does not finish")
			}
		}
	}
	if n := sweep(); n < 3 {
		t.Errorf("the first sweep took %d passes; its bounds allow no fewer than 3", n)
	}
	for name, kind := range kinds {
		b := store.buckets[name]
		thawed, released := !strings.Contains(b.policy, bkv1.MoveFreezeSid), b.tags[bkv1.TagUID] == "/"+nsUID
		switch want := kind == "frozen" || kind == "leftBehind" || kind == "releasedFrozen" || kind == "releasedCopy"; {
		case released != want:
			t.Errorf("%s (%s): released %v, want %v; tags %v", name, kind, released, want, b.tags)
		case (kind == "frozen" || kind == "releasedFrozen") && (!thawed || !strings.Contains(b.policy, `"Keep"`)):
			t.Errorf("%s (%s): policy %s; want its own statement alone", name, kind, b.policy)
		case kind != "frozen" && kind != "releasedFrozen" && kind != "goneHome" && thawed:
			t.Errorf("%s (%s): thawed", name, kind)
		case kind == "leftBehind" && b.tags[bkv1.TagMovedTo] == "":
			t.Errorf("%s: lost its moved-to tag", name)
		case len(b.versions) != 1:
			t.Errorf("%s (%s): objects %v", name, kind, b.versions)
		}
	}
	writes := store.writes()
	reads := store.count("GetBucketTagging")
	sweep()
	if n := store.writes(); n != writes {
		t.Errorf("the second sweep wrote %d times", n-writes)
	}
	released := 0
	for _, kind := range kinds {
		if kind == "frozen" || kind == "leftBehind" {
			released++
		}
	}
	// Only the buckets the first sweep released are read again (found released now).
	if n := store.count("GetBucketTagging") - reads; n != released {
		t.Errorf("the second sweep read %d buckets' tags, want the %d the first released", n, released)
	}
}

func objKey(name string) client.ObjectKey { return client.ObjectKey{Name: name} }
