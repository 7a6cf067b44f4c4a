package bucketaccess

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// collectorRig is a collector over an in-memory IAM store, with a cache and an API
// server that may disagree.
type collectorRig struct {
	t     *testing.T
	mem   *memIAM
	c     *Collector
	store *bkv1.ObjectStore
	state *collectorState
}

func newCollectorRig(t *testing.T, cached, api []client.Object) *collectorRig {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = bkv1.AddToScheme(scheme)
	clock := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	r := &collectorRig{t: t, store: &bkv1.ObjectStore{}}
	r.store.Name = "a"
	r.mem = &memIAM{keys: map[string][]iam.AccessKey{}, users: map[string]bool{}, policy: map[string]string{}, clock: clock}
	r.c = &Collector{
		Client:    fake.NewClientBuilder().WithScheme(scheme).WithObjects(cached...).Build(),
		APIReader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(api...).Build(),
		Clock:     clock, ClusterID: testCluster,
		// Unpaced: these tests count calls, not time.
		RequestsPerSecond: 1e9, Burst: 1e6,
	}
	r.state = r.c.state("a")
	return r
}

func (r *collectorRig) users(names ...string) {
	for _, n := range names {
		r.mem.users[n] = true
		r.mem.keys[n] = []iam.AccessKey{{ID: "AK-" + n}}
	}
}

func (r *collectorRig) pass() collectPass {
	r.t.Helper()
	p, err := r.c.pass(context.Background(), r.store, r.mem, r.state)
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

func (r *collectorRig) has(name string) bool {
	r.mem.mu.Lock()
	defer r.mem.mu.Unlock()
	return r.mem.users[name]
}

// TestCollectorPassIsBoundedAndResumes: a store with more orphans than one pass may
// delete is cleaned over several passes, each within the bound; live and foreign
// users stay.
func TestCollectorPassIsBoundedAndResumes(t *testing.T) {
	ba, sb := testAccess(uidLive), testBucket("data", "a")
	objs := []client.Object{&ba, &sb}
	r := newCollectorRig(t, objs, []client.Object{ptr.To(testAccess(uidLive)), ptr.To(testBucket("data", "a"))})
	live := iam.UserName(testCluster, uidLive)
	var orphans []string
	for i := range 2*defaults.AccessCollectMaxDeletions + 5 {
		orphans = append(orphans, iam.UserName(testCluster, fmt.Sprintf("11111111-2222-4333-8444-%012d", i)))
	}
	foreign := []string{"admin", "bk-admin", iam.UserName("another-cluster-0123456789abcdef0123", uidGone)}
	r.users(live)
	r.users(orphans...)
	r.users(foreign...)

	for pass := 1; ; pass++ {
		p := r.pass()
		if p.revoked > defaults.AccessCollectMaxDeletions {
			t.Fatalf("pass %d deleted %d users, more than its bound %d", pass, p.revoked, defaults.AccessCollectMaxDeletions)
		}
		if p.done {
			break
		}
		if pass > 5 {
			t.Fatal("the sweep does not finish")
		}
	}
	for _, o := range orphans {
		if r.has(o) {
			t.Errorf("orphan %s survived the sweep", o)
		}
	}
	for _, keep := range append([]string{live}, foreign...) {
		if !r.has(keep) {
			t.Errorf("%s was deleted", keep)
		}
	}
}

// TestCollectorAsksTheAPIServer: a user the cache has no access for is deleted only
// when the API server has none either (a cache that lags, or another shard's access).
func TestCollectorAsksTheAPIServer(t *testing.T) {
	r := newCollectorRig(t, nil, []client.Object{ptr.To(testAccess(uidLive)), ptr.To(testBucket("data", "a"))})
	live, gone := iam.UserName(testCluster, uidLive), iam.UserName(testCluster, uidGone)
	r.users(live, gone)
	if p := r.pass(); !p.done || p.revoked != 1 {
		t.Fatalf("pass %+v, want one deletion and the sweep done", p)
	}
	if !r.has(live) || r.has(gone) {
		t.Errorf("live kept: %v (want true), orphan kept: %v (want false)", r.has(live), r.has(gone))
	}
}

// TestCollectorPagesThroughUsers: many pages of foreign users do not hide an orphan
// behind them, and one pass reads at most AccessCollectMaxUsers.
func TestCollectorPagesThroughUsers(t *testing.T) {
	r := newCollectorRig(t, nil, nil)
	var names []string
	for i := range defaults.AccessCollectMaxUsers + 150 {
		names = append(names, fmt.Sprintf("app-%05d", i))
	}
	orphan := iam.UserName(testCluster, uidGone) // "bk-" sorts after "app-": on the last page
	r.users(names...)
	r.users(orphan)
	first := r.pass()
	if first.done || first.judged > defaults.AccessCollectMaxUsers {
		t.Fatalf("first pass %+v: want at most %d users and the sweep not done", first, defaults.AccessCollectMaxUsers)
	}
	second := r.pass()
	if !second.done || second.revoked != 1 || r.has(orphan) {
		t.Fatalf("second pass %+v: want the orphan after the first pass's pages deleted", second)
	}
	left := 0
	for _, n := range names {
		if r.has(n) {
			left++
		}
	}
	if left != len(names) {
		t.Errorf("%d of %d foreign users left", left, len(names))
	}
}

// TestCollectorGoesThroughAPageThatIgnoresMaxItems: a store that answers every user in
// one page whatever MaxItems asks (SeaweedFS), holding more users of another store's
// settled accesses (one IAM account behind both stores) than one pass may list the keys
// of, ahead of an orphan. The sweep goes on inside the page by name and ends, the orphan
// is deleted, no user's keys are listed twice in a sweep, and the next sweep lists none
// of the users found holding their access's key.
func TestCollectorGoesThroughAPageThatIgnoresMaxItems(t *testing.T) {
	var cached, api []client.Object
	sb := testBucket("data", "b")
	cached, api = append(cached, &sb), append(api, ptr.To(testBucket("data", "b")))
	var held []string
	for i := range 2*defaults.AccessCollectMaxKeyChecks + 10 {
		uid := fmt.Sprintf("0b6a2f43-9d1e-4c55-8f0a-%012d", i)
		user := iam.UserName(testCluster, uid)
		onB := func() *bkv1.BucketAccess {
			ba := testAccess(uid, issuedOn("b"), func(ba *bkv1.BucketAccess) {
				ba.Name, ba.Status.AccessKeyID = fmt.Sprintf("app-%d", i), "AK-"+user
			})
			return &ba
		}
		cached, api = append(cached, onB()), append(api, onB())
		held = append(held, user)
	}
	r := newCollectorRig(t, cached, api)
	r.mem.allInOnePage = true
	// Ours by its form, of no access, and last by name: behind every user above.
	orphan := "bk-" + iam.ClusterTag(testCluster) + "-" + strings.Repeat("f", 40)
	r.users(held...)
	r.users(orphan)

	passes := 0
	for sweep := 1; sweep <= 2; sweep++ {
		for p := r.pass(); ; p = r.pass() {
			passes++
			if p.checked > defaults.AccessCollectMaxKeyChecks {
				t.Fatalf("a pass listed the keys of %d users, more than its bound %d", p.checked, defaults.AccessCollectMaxKeyChecks)
			}
			if sweep == 2 && p.checked > 0 {
				t.Fatalf("the second sweep listed the keys of %d users already found holding their key", p.checked)
			}
			if p.done {
				break
			}
			if passes > 10 {
				t.Fatalf("the sweep does not end: pass %+v", p)
			}
		}
		if r.has(orphan) {
			t.Fatalf("sweep %d: the orphan behind %d users of another store survived", sweep, len(held))
		}
	}
	for _, u := range held {
		if !r.has(u) {
			t.Errorf("%s, which holds its access's key, was deleted", u)
		}
		if n := r.mem.keyLists[u]; n != 1 {
			t.Errorf("the keys of %s were listed %d times in two sweeps, want once", u, n)
		}
	}
}

// TestCollectorRechecksWhenTheKeyChanges: a user found holding its access's key is
// checked again once the access's key changes (a rotation), and deleted if it does not
// hold the new one.
func TestCollectorRechecksWhenTheKeyChanges(t *testing.T) {
	uid := uidLive
	user := iam.UserName(testCluster, uid)
	onB := func(key string) []client.Object {
		ba := testAccess(uid, issuedOn("b"), func(ba *bkv1.BucketAccess) { ba.Status.AccessKeyID = key })
		return []client.Object{&ba, ptr.To(testBucket("data", "b"))}
	}
	r := newCollectorRig(t, onB("AK-"+user), onB("AK-"+user))
	r.users(user)
	if p := r.pass(); !p.done || p.checked != 1 || !r.has(user) {
		t.Fatalf("first sweep %+v: want one key check and the user kept", p)
	}
	if p := r.pass(); p.checked != 0 {
		t.Fatalf("second sweep %+v: want no key check", p)
	}
	r2 := newCollectorRig(t, onB("AK-rotated"), onB("AK-rotated"))
	r2.mem, r2.c.stores = r.mem, r.c.stores
	r2.state = r.state
	if p := r2.pass(); p.checked != 1 || p.revoked != 1 || r.has(user) {
		t.Fatalf("after the key changed %+v: want the user checked again and deleted", p)
	}
}

// TestCollectorKeepsTheUserBeingIssuedOnAnotherStore: an access whose bucket is Ready
// on store b and whose status names no key there yet (its key may be being issued
// there). Listed on store a, its user
// stays while it holds no key, or a key the user on b holds too (one IAM account behind
// both stores: the same user, which deleting would take from under the issue); a user
// holding a key that b's user does not hold is a leftover, and goes.
func TestCollectorKeepsTheUserBeingIssuedOnAnotherStore(t *testing.T) {
	user := iam.UserName(testCluster, uidLive)
	for _, tc := range []struct {
		name        string
		here, there []string
		keep        bool
	}{
		{"no key yet", nil, nil, true},
		{"one account: the same key on both", []string{"AK1"}, []string{"AK1"}, true},
		{"another account: a key of its own", []string{"AK-old"}, []string{"AK2"}, false},
		{"nothing on the other store yet", []string{"AK-old"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := func() []client.Object {
				ba := testAccess(uidLive, func(ba *bkv1.BucketAccess) { ba.Status.ObjectStore = "b" })
				return []client.Object{&ba, ptr.To(testBucket("data", "b", ready)), &bkv1.ObjectStore{
					ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "b-uid"},
					Spec:       bkv1.ObjectStoreSpec{Endpoint: "http://b", AccessProvider: &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM}},
				}}
			}
			r := newCollectorRig(t, objs(), objs())
			there := &memIAM{keys: map[string][]iam.AccessKey{}, users: map[string]bool{}, policy: map[string]string{}}
			registry := &stores.Registry{Client: r.c.Client.(client.Client), APIReader: r.c.Client}
			r.c.Access = &stores.AccessProviders{Stores: registry, Factory: func(context.Context, iam.Config) (iam.Driver, error) { return there, nil }}
			r.mem.users[user] = true
			for _, id := range tc.here {
				r.mem.keys[user] = append(r.mem.keys[user], iam.AccessKey{ID: id})
			}
			if tc.there != nil {
				there.users[user] = true
				for _, id := range tc.there {
					there.keys[user] = append(there.keys[user], iam.AccessKey{ID: id})
				}
			}
			p := r.pass()
			if r.has(user) != tc.keep {
				t.Errorf("pass %+v: user kept %v, want %v", p, r.has(user), tc.keep)
			}
		})
	}
}
