package storagebucket

import (
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

func ownershipName(o ownership) string {
	switch o {
	case unowned:
		return "unowned"
	case ownedByUs:
		return "ownedByUs"
	case released:
		return "released"
	case ownedByOther:
		return "ownedByOther"
	case otherCluster:
		return "otherCluster"
	}
	return fmt.Sprintf("ownership(%d)", int(o))
}

func TestOwnershipOf(t *testing.T) {
	const (
		claim   = "team-a/data"
		uid     = types.UID("1111-aaaa")
		ns      = types.UID("ns-1")
		cluster = "cluster-1"
	)
	me := owner{claim: claim, uid: uid, namespace: ns, cluster: cluster}
	tags := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	ours := string(uid) + "/" + string(ns)
	tests := []struct {
		name string
		tags map[string]string
		want ownership
		// anyIncarnation: the verdict with the store's allowRebindToRecreatedNamespace
		// (the same as want when zero).
		anyIncarnation ownership
	}{
		{"nil tags", nil, unowned, 0},
		{"no tags", map[string]string{}, unowned, 0},
		{"only foreign tags", tags("team", "a", "cost-center", "42"), unowned, 0},
		{"empty ownership tags count as absent", tags(bkv1.TagClaim, "", bkv1.TagUID, "", bkv1.TagCluster, ""), unowned, 0},
		{"ours", tags(bkv1.TagClaim, claim, bkv1.TagUID, ours, bkv1.TagCluster, cluster), ownedByUs, 0},
		{"ours with extra tags", tags(bkv1.TagClaim, claim, bkv1.TagUID, ours, bkv1.TagCluster, cluster, "team", "a"), ownedByUs, 0},
		{"ours, tagged before namespace UIDs were recorded", tags(bkv1.TagClaim, claim, bkv1.TagUID, string(uid), bkv1.TagCluster, cluster), ownedByUs, 0},
		{"ours, tagged before cluster tags existed", tags(bkv1.TagClaim, claim, bkv1.TagUID, string(uid)), ownedByUs, 0},
		{"released from this namespace", tags(bkv1.TagClaim, claim, bkv1.TagUID, "/"+string(ns), bkv1.TagCluster, cluster), released, 0},
		{"uid of a deleted claim of this namespace", tags(bkv1.TagClaim, claim, bkv1.TagUID, "2222-bbbb/"+string(ns), bkv1.TagCluster, cluster), released, 0},
		{"released from a namespace of the same name made earlier", tags(bkv1.TagClaim, claim, bkv1.TagUID, "/ns-0", bkv1.TagCluster, cluster), ownedByOther, released},
		{"uid of a deleted claim of an earlier namespace", tags(bkv1.TagClaim, claim, bkv1.TagUID, "2222-bbbb/ns-0", bkv1.TagCluster, cluster), ownedByOther, released},
		{"released before namespace UIDs were recorded", tags(bkv1.TagClaim, claim, bkv1.TagCluster, cluster), ownedByOther, released},
		{"released before namespace UIDs were recorded: empty uid", tags(bkv1.TagClaim, claim, bkv1.TagUID, "", bkv1.TagCluster, cluster), ownedByOther, released},
		{"uid of a deleted claim, before namespace UIDs were recorded", tags(bkv1.TagClaim, claim, bkv1.TagUID, "2222-bbbb", bkv1.TagCluster, cluster), ownedByOther, released},
		{"released without cluster tag: unknown cluster", tags(bkv1.TagClaim, claim), ownedByOther, 0},
		{"same claim other uid without cluster tag", tags(bkv1.TagClaim, claim, bkv1.TagUID, "2222-bbbb/"+string(ns)), ownedByOther, 0},
		{"other cluster, same claim and uid", tags(bkv1.TagClaim, claim, bkv1.TagUID, ours, bkv1.TagCluster, "cluster-2"), otherCluster, 0},
		{"other cluster, released", tags(bkv1.TagClaim, claim, bkv1.TagUID, "/"+string(ns), bkv1.TagCluster, "cluster-2"), otherCluster, 0},
		{"other cluster tag alone", tags(bkv1.TagCluster, "cluster-2"), otherCluster, 0},
		{"other claim with our uid", tags(bkv1.TagClaim, "team-b/data", bkv1.TagUID, ours, bkv1.TagCluster, cluster), ownedByOther, 0},
		{"other claim with other uid", tags(bkv1.TagClaim, "team-b/data", bkv1.TagUID, "2222-bbbb/"+string(ns), bkv1.TagCluster, cluster), ownedByOther, 0},
		{"other claim released", tags(bkv1.TagClaim, "team-b/data", bkv1.TagUID, "/"+string(ns), bkv1.TagCluster, cluster), ownedByOther, 0},
		{"uid without claim (other)", tags(bkv1.TagUID, "2222-bbbb", bkv1.TagCluster, cluster), ownedByOther, 0},
		{"claim differs only in case", tags(bkv1.TagClaim, "Team-A/data", bkv1.TagUID, ours, bkv1.TagCluster, cluster), ownedByOther, 0},
		{"claim is a prefix of ours", tags(bkv1.TagClaim, "team-a/dat", bkv1.TagUID, "x/"+string(ns), bkv1.TagCluster, cluster), ownedByOther, 0},
		{"namespace part alone of our uid", tags(bkv1.TagClaim, claim, bkv1.TagUID, "/", bkv1.TagCluster, cluster), ownedByOther, released},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := me.of(tc.tags, false); got != tc.want {
				t.Errorf("%+v.of(%v) = %s, want %s", me, tc.tags, ownershipName(got), ownershipName(tc.want))
			}
			want := tc.anyIncarnation
			if want == 0 {
				want = tc.want
			}
			if got := me.of(tc.tags, true); got != want {
				t.Errorf("%+v.of(%v, any incarnation) = %s, want %s", me, tc.tags, ownershipName(got), ownershipName(want))
			}
		})
	}
}

func TestOwnershipTags(t *testing.T) {
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "data", UID: "1111-aaaa"}}
	r := &Reconciler{ClusterID: "cluster-1"}
	me := r.ownerIn(sb, "ns-1")
	tags := me.tags()
	want := map[string]string{bkv1.TagClaim: "team-a/data", bkv1.TagUID: "1111-aaaa/ns-1", bkv1.TagCluster: "cluster-1"}
	if !maps.Equal(tags, want) {
		t.Errorf("tags = %v, want %v", tags, want)
	}
	// The tags written are exactly what is recognised as ours, and the released tags
	// are what is recognised as released.
	if got := me.of(tags, false); got != ownedByUs {
		t.Errorf("of(tags) = %s, want ownedByUs", ownershipName(got))
	}
	if got := me.of(me.releasedTags(), false); got != released {
		t.Errorf("of(releasedTags) = %s, want released", ownershipName(got))
	}
	if !me.recordsNamespace(tags) || me.recordsNamespace(map[string]string{bkv1.TagUID: "1111-aaaa"}) {
		t.Error("recordsNamespace does not tell the tags with the namespace's UID from those without")
	}
	// A later incarnation (same namespace/name, new UID) of the same cluster in the
	// same namespace binds the bucket again, released or not; in a namespace made
	// again under the same name, only where the store allows it; another cluster's
	// never.
	next := sb.DeepCopy()
	next.UID = "3333-cccc"
	for _, tt := range []map[string]string{me.releasedTags(), me.tags()} {
		if got := r.ownerIn(next, "ns-1").of(tt, false); got != released {
			t.Errorf("bucket tagged %v seen by a new incarnation = %s, want released", tt, ownershipName(got))
		}
		if got := r.ownerIn(next, "ns-2").of(tt, false); got != ownedByOther {
			t.Errorf("bucket tagged %v seen from a recreated namespace = %s, want ownedByOther", tt, ownershipName(got))
		}
		if got := r.ownerIn(next, "ns-2").of(tt, true); got != released {
			t.Errorf("bucket tagged %v seen from a recreated namespace the store allows = %s, want released", tt, ownershipName(got))
		}
		other := (&Reconciler{ClusterID: "cluster-2"}).ownerIn(next, "ns-1")
		if got := other.of(tt, true); got != otherCluster {
			t.Errorf("bucket tagged %v seen by another cluster = %s, want otherCluster", tt, ownershipName(got))
		}
	}
	// tags returns a fresh map every time: callers may modify it.
	tags[bkv1.TagClaim] = "changed"
	if me.tags()[bkv1.TagClaim] != "team-a/data" {
		t.Error("tags shares its map between calls")
	}
}

func TestClaimTagStaysWithinS3Limit(t *testing.T) {
	long := strings.Repeat("n", 253)
	ns := strings.Repeat("s", 63)
	a, b := claimTag(ns, long), claimTag(ns, long[:252]+"m")
	if len(a) > bkv1.MaxTagValueLength || len(b) > bkv1.MaxTagValueLength {
		t.Fatalf("claim tags of %d and %d characters, limit %d", len(a), len(b), bkv1.MaxTagValueLength)
	}
	if a == b {
		t.Errorf("two long claims share the tag %q", a)
	}
	if a != claimTag(ns, long) {
		t.Error("claimTag is not deterministic")
	}
	if got := claimTag("team-a", "data"); got != "team-a/data" {
		t.Errorf("short claim tag = %q, want team-a/data", got)
	}
	if !regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+@-]*$`).MatchString(a) {
		t.Errorf("claim tag %q leaves S3's tag character set", a)
	}
}

func TestWithoutSystemTags(t *testing.T) {
	in := map[string]string{"aws:cloudformation:stack-name": "s", "team": "a", bkv1.TagClaim: "x/y"}
	got := withoutSystemTags(in)
	if want := map[string]string{"team": "a", bkv1.TagClaim: "x/y"}; !maps.Equal(got, want) {
		t.Errorf("withoutSystemTags = %v, want %v", got, want)
	}
	if len(in) != 3 {
		t.Error("withoutSystemTags modified its argument")
	}
}

func TestSyncMemo(t *testing.T) {
	const interval = 10 * time.Minute
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	keyA := types.NamespacedName{Namespace: "ns", Name: "a"}
	keyB := types.NamespacedName{Namespace: "ns", Name: "b"}

	// op is one step against a memo: "done" records, "forget" drops, "due" checks.
	type op struct {
		kind     string
		key      types.NamespacedName
		uid      types.UID
		version  syncInputs
		at       time.Time
		interval time.Duration
		want     bool
	}
	v := func(generation int64, store types.UID, storeGeneration int64) syncInputs {
		return syncInputs{generation: generation, store: store, storeGeneration: storeGeneration}
	}
	done := func(key types.NamespacedName, uid types.UID, version syncInputs, at time.Time) op {
		return op{kind: "done", key: key, uid: uid, version: version, at: at}
	}
	forget := func(key types.NamespacedName) op { return op{kind: "forget", key: key} }
	due := func(key types.NamespacedName, uid types.UID, version syncInputs, at time.Time, interval time.Duration, want bool) op {
		return op{kind: "due", key: key, uid: uid, version: version, at: at, interval: interval, want: want}
	}

	tests := []struct {
		name string
		ops  []op
	}{
		{"empty memo is due", []op{
			due(keyA, "u1", v(1, "s", 1), t0, interval, true),
		}},
		{"forget on an empty memo is harmless", []op{
			forget(keyA),
			due(keyA, "u1", v(1, "s", 1), t0, interval, true),
		}},
		{"done makes it not due", []op{
			done(keyA, "u1", v(1, "s", 1), t0),
			due(keyA, "u1", v(1, "s", 1), t0, interval, false),
			due(keyA, "u1", v(1, "s", 1), t0.Add(time.Minute), interval, false),
		}},
		{"interval expiry is inclusive", []op{
			done(keyA, "u1", v(1, "s", 1), t0),
			due(keyA, "u1", v(1, "s", 1), t0.Add(interval-time.Nanosecond), interval, false),
			due(keyA, "u1", v(1, "s", 1), t0.Add(interval), interval, true),
			due(keyA, "u1", v(1, "s", 1), t0.Add(interval+time.Hour), interval, true),
		}},
		{"zero interval is always due", []op{
			done(keyA, "u1", v(1, "s", 1), t0),
			due(keyA, "u1", v(1, "s", 1), t0, 0, true),
		}},
		{"a shorter interval makes the same record due", []op{
			done(keyA, "u1", v(1, "s", 1), t0),
			due(keyA, "u1", v(1, "s", 1), t0.Add(2*time.Minute), interval, false),
			due(keyA, "u1", v(1, "s", 1), t0.Add(2*time.Minute), time.Minute, true),
		}},
		{"uid change is due", []op{
			done(keyA, "u1", v(1, "s", 1), t0),
			due(keyA, "u2", v(1, "s", 1), t0, interval, true),
			due(keyA, "u1", v(1, "s", 1), t0, interval, false),
		}},
		{"version change is due", []op{
			done(keyA, "u1", v(1, "s", 1), t0),
			due(keyA, "u1", v(2, "s", 1), t0, interval, true),
			due(keyA, "u1", v(1, "s", 2), t0, interval, true),
			due(keyA, "u1", v(1, "t", 1), t0, interval, true),
		}},
		{"done again moves the record on", []op{
			done(keyA, "u1", v(1, "s", 1), t0),
			done(keyA, "u1", v(2, "s", 1), t0.Add(8*time.Minute)),
			due(keyA, "u1", v(1, "s", 1), t0.Add(9*time.Minute), interval, true),
			due(keyA, "u1", v(2, "s", 1), t0.Add(interval+time.Minute), interval, false),
			due(keyA, "u1", v(2, "s", 1), t0.Add(18*time.Minute), interval, true),
		}},
		{"new uid recorded replaces the old one", []op{
			done(keyA, "u1", v(1, "s", 1), t0),
			done(keyA, "u2", v(1, "s", 1), t0),
			due(keyA, "u1", v(1, "s", 1), t0, interval, true),
			due(keyA, "u2", v(1, "s", 1), t0, interval, false),
		}},
		{"forget makes it due", []op{
			done(keyA, "u1", v(1, "s", 1), t0),
			forget(keyA),
			due(keyA, "u1", v(1, "s", 1), t0, interval, true),
		}},
		{"keys are independent", []op{
			done(keyA, "u1", v(1, "s", 1), t0),
			due(keyB, "u1", v(1, "s", 1), t0, interval, true),
			done(keyB, "u2", v(1, "s", 1), t0),
			forget(keyA),
			due(keyA, "u1", v(1, "s", 1), t0, interval, true),
			due(keyB, "u2", v(1, "s", 1), t0, interval, false),
		}},
		{"same name in another namespace is another key", []op{
			done(keyA, "u1", v(1, "s", 1), t0),
			due(types.NamespacedName{Namespace: "other", Name: keyA.Name}, "u1", v(1, "s", 1), t0, interval, true),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m syncMemo
			for i, o := range tc.ops {
				switch o.kind {
				case "done":
					m.done(o.key, o.uid, o.version, o.at)
				case "forget":
					m.forget(o.key)
				case "due":
					if got := m.due(o.key, o.uid, o.version, o.at, o.interval); got != o.want {
						t.Errorf("step %d: due(%v, %q, %+v, t0%+v, %v) = %v, want %v", i, o.key, o.uid, o.version, o.at.Sub(t0), o.interval, got, o.want)
					}
				}
			}
		})
	}
}

// TestSyncMemoConcurrent is meant for -race: reconciles of different objects share the
// memo from several workers.
func TestSyncMemoConcurrent(t *testing.T) {
	var m syncMemo
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				key := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("sb-%d", (w+i)%5)}
				m.done(key, "u", syncInputs{generation: 1}, t0)
				_ = m.due(key, "u", syncInputs{generation: 1}, t0, time.Minute)
				if i%7 == 0 {
					m.forget(key)
				}
			}
		}()
	}
	wg.Wait()
}

func TestSyncMemoVersion(t *testing.T) {
	scope := func(sbGen int64, storeUID types.UID, storeGen int64) *bucketScope {
		return &bucketScope{
			sb:    &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Generation: sbGen}},
			store: &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{UID: storeUID, Generation: storeGen}},
		}
	}
	base := syncVersion(scope(1, "s1", 1))
	if again := syncVersion(scope(1, "s1", 1)); again != base {
		t.Errorf("syncVersion not stable: %+v then %+v", base, again)
	}
	for name, s := range map[string]*bucketScope{
		"bucket generation": scope(2, "s1", 1),
		"store uid":         scope(1, "s2", 1),
		"store generation":  scope(1, "s1", 2),
	} {
		if v := syncVersion(s); v == base {
			t.Errorf("a change of %s leaves syncVersion at %+v", name, v)
		}
	}
	// The fields are kept apart, so different triples never collide.
	if a, b := syncVersion(scope(11, "s1", 1)), syncVersion(scope(1, "1s1", 1)); a == b {
		t.Errorf("syncVersion collides: %+v", a)
	}
}

func TestSyncMemoSettled(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason}
	}
	provisioned := cond(bkv1.ConditionProvisioned, metav1.ConditionTrue, bkv1.ReasonBucketCreated)
	tests := []struct {
		name   string
		bucket string
		conds  []metav1.Condition
		want   bool
	}{
		{"empty status", "", nil, false},
		{"no bucket name", "", []metav1.Condition{provisioned, cond(bkv1.ConditionConfigured, metav1.ConditionTrue, bkv1.ReasonConfigApplied)}, false},
		{"no Provisioned", "b", []metav1.Condition{cond(bkv1.ConditionConfigured, metav1.ConditionTrue, bkv1.ReasonConfigApplied)}, false},
		{"Provisioned False", "b", []metav1.Condition{cond(bkv1.ConditionProvisioned, metav1.ConditionFalse, bkv1.ReasonOwnedByAnotherClaim), cond(bkv1.ConditionConfigured, metav1.ConditionTrue, bkv1.ReasonConfigApplied)}, false},
		{"no Configured", "b", []metav1.Condition{provisioned}, false},
		{"Configured True", "b", []metav1.Condition{provisioned, cond(bkv1.ConditionConfigured, metav1.ConditionTrue, bkv1.ReasonConfigApplied)}, true},
		{"Configured False: not supported by store", "b", []metav1.Condition{provisioned, cond(bkv1.ConditionConfigured, metav1.ConditionFalse, bkv1.ReasonNotSupportedByStore)}, true},
		{"Configured False: transient failure", "b", []metav1.Condition{provisioned, cond(bkv1.ConditionConfigured, metav1.ConditionFalse, bkv1.ReasonThrottled)}, false},
		{"Configured False: invalid config", "b", []metav1.Condition{provisioned, cond(bkv1.ConditionConfigured, metav1.ConditionFalse, bkv1.ReasonConfigFailed)}, false},
		{"Configured Unknown", "b", []metav1.Condition{provisioned, cond(bkv1.ConditionConfigured, metav1.ConditionUnknown, bkv1.ReasonProgressing)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := &bkv1.StorageBucket{}
			sb.Status.BucketName = tc.bucket
			sb.Status.Conditions = tc.conds
			if got := settled(sb); got != tc.want {
				t.Errorf("settled = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSyncMemoSyncDue checks the gate the bucket and configuration steps share: status
// must show a finished sync, and then the memo decides.
func TestSyncMemoSyncDue(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	r := &Reconciler{Clock: clk, SyncInterval: 5 * time.Minute}

	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sb", UID: "u1", Generation: 1}}
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "store", UID: "s1", Generation: 1}}
	scope := &bucketScope{sb: sb, owner: testOwner(sb), store: store}
	markDone := func() {
		r.synced.done(types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}, sb.UID, syncVersion(scope), clk.Now())
	}

	if !r.syncDue(scope) {
		t.Fatal("a new object is not due")
	}
	markDone()
	if !r.syncDue(scope) {
		t.Fatal("memo alone (status not settled) made the object not due")
	}
	sb.Status.BucketName = "b"
	sb.Status.Conditions = []metav1.Condition{
		{Type: bkv1.ConditionProvisioned, Status: metav1.ConditionTrue, Reason: bkv1.ReasonBucketCreated},
		{Type: bkv1.ConditionConfigured, Status: metav1.ConditionTrue, Reason: bkv1.ReasonConfigApplied},
	}
	if r.syncDue(scope) {
		t.Fatal("settled and freshly synced object is due")
	}
	clk.SetTime(t0.Add(4 * time.Minute))
	if r.syncDue(scope) {
		t.Fatal("due before SyncInterval")
	}
	clk.SetTime(t0.Add(5 * time.Minute))
	if !r.syncDue(scope) {
		t.Fatal("not due after SyncInterval")
	}
	markDone()
	if r.syncDue(scope) {
		t.Fatal("due right after a new sync")
	}
	store.Generation = 2
	if !r.syncDue(scope) {
		t.Fatal("a store change does not make the object due")
	}
	store.Generation = 1
	sb.Generation = 2
	if !r.syncDue(scope) {
		t.Fatal("a new generation does not make the object due")
	}
	sb.Generation = 1
	r.synced.forget(types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name})
	if !r.syncDue(scope) {
		t.Fatal("a forgotten object is not due")
	}
}
