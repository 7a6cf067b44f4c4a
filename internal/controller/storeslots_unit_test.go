package controller

import "testing"

// TestStoreSlots: a store gets at most its limit of slots, a released slot is free again
// (once, however often release is called), and stores do not share slots.
func TestStoreSlots(t *testing.T) {
	var s storeSlots
	var releases []func()
	for i := range 3 {
		release, ok := s.tryAcquire("a", 3)
		if !ok {
			t.Fatalf("slot %d of 3 refused", i+1)
		}
		releases = append(releases, release)
	}
	if _, ok := s.tryAcquire("a", 3); ok {
		t.Fatal("a fourth slot was granted with a limit of 3")
	}
	if release, ok := s.tryAcquire("b", 3); !ok {
		t.Fatal("another store was refused while the first one is full")
	} else {
		release()
	}
	releases[0]()
	releases[0]() // a second release must not free a slot someone else holds
	if _, ok := s.tryAcquire("a", 3); !ok {
		t.Fatal("a released slot was not free again")
	}
	if _, ok := s.tryAcquire("a", 3); ok {
		t.Fatal("releasing twice freed two slots")
	}
	if _, ok := s.tryAcquire("a", 0); !ok {
		t.Fatal("limit 0 must mean no cap")
	}
}

// TestReconcileCapNeedsAnotherStore: the per-store cap protects the other stores'
// buckets, so it is in force only while another store exists.
func TestReconcileCapNeedsAnotherStore(t *testing.T) {
	r := &StoreRegistry{MaxReconcilesPerStore: 3}
	for stores, want := range map[int]int{0: 0, 1: 0, 2: 3, 5: 3} {
		if got := r.reconcileCap(stores); got != want {
			t.Errorf("%d stores: cap %d, want %d", stores, got, want)
		}
	}
}
