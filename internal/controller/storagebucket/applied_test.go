package storagebucket

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

func mineOf(names ...string) func(string) bool {
	return func(n string) bool { return slices.Contains(names, n) }
}

func TestMergeTags(t *testing.T) {
	own := map[string]string{bkv1.TagClaim: "ns/sb", bkv1.TagUID: "u1"}
	with := func(m map[string]string) map[string]string {
		out := maps.Clone(m)
		maps.Copy(out, own)
		return out
	}
	tests := []struct {
		name            string
		have, spec      map[string]string
		mine            func(string) bool
		want            map[string]string
		wantSameAsHave  bool
		wantNoSystemTag bool
	}{
		{name: "adopted: foreign tags kept, spec tags added",
			have: map[string]string{"cost-center": "cc-1", "owner": "finance"}, spec: map[string]string{"team": "data"}, mine: mineOf(),
			want: with(map[string]string{"cost-center": "cc-1", "owner": "finance", "team": "data"})},
		{name: "adopted: spec names a foreign key, spec wins",
			have: map[string]string{"cost-center": "cc-1"}, spec: map[string]string{"cost-center": "cc-2"}, mine: mineOf(),
			want: with(map[string]string{"cost-center": "cc-2"})},
		{name: "adopted: a key the operator applied and the spec dropped is removed",
			have: with(map[string]string{"cost-center": "cc-2", "owner": "finance", "team": "data"}), spec: map[string]string{"team": "data"}, mine: mineOf("cost-center", "team"),
			want: with(map[string]string{"owner": "finance", "team": "data"})},
		{name: "adopted: converged is unchanged",
			have: with(map[string]string{"owner": "finance", "team": "data"}), spec: map[string]string{"team": "data"}, mine: mineOf("team"),
			want: with(map[string]string{"owner": "finance", "team": "data"}), wantSameAsHave: true},
		{name: "ownership tags always win over found ones",
			have: map[string]string{bkv1.TagClaim: "forged/claim", bkv1.TagUID: "other"}, mine: mineOf(),
			want: own},
		{name: "store's own tags are never sent back",
			have: map[string]string{"aws:cloudformation:stack-name": "s", "owner": "finance"}, mine: mineOf(),
			want: with(map[string]string{"owner": "finance"}), wantNoSystemTag: true},
		{name: "created: everything not in the spec goes",
			have: with(map[string]string{"stray": "x", "team": "old"}), spec: map[string]string{"team": "data"}, mine: allMine,
			want: with(map[string]string{"team": "data"})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			haveBefore := maps.Clone(tc.have)
			got := mergeTags(tc.have, tc.spec, own, tc.mine)
			if !maps.Equal(got, tc.want) {
				t.Errorf("mergeTags = %v, want %v", got, tc.want)
			}
			if !maps.Equal(tc.have, haveBefore) {
				t.Errorf("mergeTags changed its input: %v", tc.have)
			}
			if same := maps.Equal(withoutSystemTags(tc.have), got); same != tc.wantSameAsHave {
				t.Errorf("same as the bucket = %v, want %v", same, tc.wantSameAsHave)
			}
			for k := range got {
				if strings.HasPrefix(k, bkv1.SystemTagPrefix) {
					t.Errorf("system tag %s would be written", k)
				}
			}
		})
	}
}

func TestMergeLifecycle(t *testing.T) {
	rule := func(id, prefix string, days int32) s3.LifecycleRule {
		return s3.LifecycleRule{ID: id, Prefix: prefix, ExpirationDays: ptr.To(days)}
	}
	foreign := rule("archive", "logs/", 90)
	foreignOff := s3.LifecycleRule{ID: "paused", Disabled: true, ExpirationDays: ptr.To[int32](5)}
	tmp, tmpLonger := rule("tmp", "tmp/", 1), rule("tmp", "tmp/", 7)
	tests := []struct {
		name       string
		have, want []s3.LifecycleRule
		mine       func(string) bool
		wantMerged []s3.LifecycleRule
		wantSame   bool
	}{
		{name: "adopted, spec has none: foreign rules stay, nothing to write",
			have: []s3.LifecycleRule{foreign, foreignOff}, mine: mineOf(),
			wantMerged: []s3.LifecycleRule{foreign, foreignOff}, wantSame: true},
		{name: "adopted, spec adds a rule next to the foreign ones",
			have: []s3.LifecycleRule{foreign, foreignOff}, want: []s3.LifecycleRule{tmp}, mine: mineOf(),
			wantMerged: []s3.LifecycleRule{foreign, foreignOff, tmp}},
		{name: "adopted, spec names a foreign rule's ID: replaced",
			have: []s3.LifecycleRule{foreign}, want: []s3.LifecycleRule{rule("archive", "logs/", 30)}, mine: mineOf(),
			wantMerged: []s3.LifecycleRule{rule("archive", "logs/", 30)}},
		{name: "our rule changed in the spec: replaced, foreign kept",
			have: []s3.LifecycleRule{foreign, tmp}, want: []s3.LifecycleRule{tmpLonger}, mine: mineOf("tmp"),
			wantMerged: []s3.LifecycleRule{foreign, tmpLonger}},
		{name: "our rule dropped from the spec: removed, foreign kept",
			have: []s3.LifecycleRule{foreign, tmp}, mine: mineOf("tmp"),
			wantMerged: []s3.LifecycleRule{foreign}},
		{name: "our only rule dropped: nothing left (delete)",
			have: []s3.LifecycleRule{tmp}, mine: mineOf("tmp"),
			wantMerged: nil},
		{name: "our rule disabled out of band: enabled again",
			have: []s3.LifecycleRule{{ID: "tmp", Prefix: "tmp/", ExpirationDays: ptr.To[int32](1), Disabled: true}}, want: []s3.LifecycleRule{tmp}, mine: mineOf("tmp"),
			wantMerged: []s3.LifecycleRule{tmp}},
		{name: "converged, store returns another order",
			have: []s3.LifecycleRule{tmp, foreign}, want: []s3.LifecycleRule{tmp}, mine: mineOf("tmp"),
			wantMerged: []s3.LifecycleRule{foreign, tmp}, wantSame: true},
		{name: "created: everything not in the spec goes",
			have: []s3.LifecycleRule{foreign, tmp}, want: []s3.LifecycleRule{tmp}, mine: allMine,
			wantMerged: []s3.LifecycleRule{tmp}},
		{name: "nothing anywhere",
			mine: mineOf(), wantSame: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			merged, same := mergeLifecycle(tc.have, tc.want, tc.mine)
			if len(merged) == 0 {
				merged = nil
			}
			if !reflect.DeepEqual(merged, tc.wantMerged) || same != tc.wantSame {
				t.Errorf("mergeLifecycle = %+v, same %v; want %+v, same %v", merged, same, tc.wantMerged, tc.wantSame)
			}
		})
	}
}

// adoptedBucket is a StorageBucket that adopted bucket "b" (no create intent), with
// what the operator applied so far.
func adoptedBucket(applied *bkv1.AppliedConfiguration) *bkv1.StorageBucket {
	sb := newSpecBucket()
	sb.Status.CreateIntent = nil
	sb.Status.Applied = applied
	return sb
}

// TestAbsentSettingsRule runs the whole configuration (fake store) for the cases of the
// rule: found and never applied is left alone, applied and dropped is removed.
func TestAbsentSettingsRule(t *testing.T) {
	const foreignPolicy = `{"Version":"2012-10-17","Statement":[{"Sid":"tls","Effect":"Deny","Principal":"*","Action":"s3:*","Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"],"Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`
	foreignRule := s3.LifecycleRule{ID: "archive", Prefix: "logs/", ExpirationDays: ptr.To[int32](90)}
	tmp := bkv1.LifecycleRule{ID: "tmp", Prefix: "tmp/", ExpirationDays: ptr.To[int32](1)}
	tmpRule := s3.LifecycleRule{ID: "tmp", Prefix: "tmp/", ExpirationDays: ptr.To[int32](1)}
	foreignStore := func() *fakeS3 {
		return &fakeS3{versioning: s3.VersioningEnabled, tags: map[string]string{"cost-center": "cc-1"},
			lifecycle: []s3.LifecycleRule{foreignRule}, policy: foreignPolicy, pab: &fullBlock}
	}
	tests := []struct {
		name        string
		sb          *bkv1.StorageBucket
		spec        func(*bkv1.StorageBucketSpec)
		store       *fakeS3
		wantWrites  []string
		wantReads   func(reads []string) bool
		wantStore   fakeS3
		wantApplied *bkv1.AppliedConfiguration
	}{
		{name: "adopted, spec names nothing: all left alone, policy and lifecycle not even read",
			sb: adoptedBucket(nil), store: foreignStore(),
			wantWrites: []string{"PutBucketTagging"},
			wantReads: func(r []string) bool {
				return !slices.Contains(r, "GetBucketPolicy") && !slices.Contains(r, "GetBucketLifecycle") && !slices.Contains(r, "GetBucketVersioning")
			},
			wantStore: fakeS3{versioning: s3.VersioningEnabled, tags: map[string]string{"cost-center": "cc-1", bkv1.TagClaim: "team-a/data", bkv1.TagUID: "1111-aaaa"},
				lifecycle: []s3.LifecycleRule{foreignRule}, policy: foreignPolicy}},
		{name: "adopted, spec names a tag, a rule and a policy",
			sb: adoptedBucket(nil), store: foreignStore(),
			spec: func(s *bkv1.StorageBucketSpec) {
				s.Tags = map[string]string{"cost-center": "cc-2", "team": "data"}
				s.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{tmp}}
				s.Policy = &apiextensionsv1.JSON{Raw: []byte(specPolicy)}
			},
			wantWrites: []string{"PutBucketTagging", "PutBucketLifecycle", "PutBucketPolicy"},
			wantStore: fakeS3{versioning: s3.VersioningEnabled, tags: map[string]string{"cost-center": "cc-2", "team": "data", bkv1.TagClaim: "team-a/data", bkv1.TagUID: "1111-aaaa"},
				lifecycle: []s3.LifecycleRule{foreignRule, tmpRule}, policy: specPolicy},
			wantApplied: &bkv1.AppliedConfiguration{TagKeys: []string{"cost-center", "team"}, LifecycleRules: []string{"tmp"}, Policy: true}},
		{name: "adopted, spec drops what the operator applied: exactly that goes",
			sb: adoptedBucket(&bkv1.AppliedConfiguration{TagKeys: []string{"cost-center", "team"}, LifecycleRules: []string{"tmp"}, Policy: true}),
			store: &fakeS3{tags: map[string]string{"cost-center": "cc-2", "owner": "finance", "team": "data", bkv1.TagClaim: "team-a/data", bkv1.TagUID: "1111-aaaa"},
				lifecycle: []s3.LifecycleRule{foreignRule, tmpRule}, policy: specPolicy, pab: &fullBlock},
			spec:       func(s *bkv1.StorageBucketSpec) { s.Tags = map[string]string{"team": "data"} },
			wantWrites: []string{"PutBucketTagging", "PutBucketLifecycle", "DeleteBucketPolicy"},
			wantStore: fakeS3{tags: map[string]string{"owner": "finance", "team": "data", bkv1.TagClaim: "team-a/data", bkv1.TagUID: "1111-aaaa"},
				lifecycle: []s3.LifecycleRule{foreignRule}},
			wantApplied: &bkv1.AppliedConfiguration{TagKeys: []string{"team"}}},
		{name: "versioning the operator enabled and the spec dropped is suspended",
			sb:         adoptedBucket(&bkv1.AppliedConfiguration{Versioning: true}),
			store:      &fakeS3{versioning: s3.VersioningEnabled, tags: map[string]string{bkv1.TagClaim: "team-a/data", bkv1.TagUID: "1111-aaaa"}, pab: &fullBlock},
			wantWrites: []string{"PutBucketVersioning"},
			wantStore:  fakeS3{versioning: s3.VersioningSuspended, tags: map[string]string{bkv1.TagClaim: "team-a/data", bkv1.TagUID: "1111-aaaa"}}},
		{name: "versioning found on an adopted bucket is left while the spec does not name it",
			sb:        adoptedBucket(nil),
			store:     &fakeS3{versioning: s3.VersioningEnabled, tags: map[string]string{bkv1.TagClaim: "team-a/data", bkv1.TagUID: "1111-aaaa"}, pab: &fullBlock},
			wantReads: func(r []string) bool { return !slices.Contains(r, "GetBucketVersioning") },
			wantStore: fakeS3{versioning: s3.VersioningEnabled, tags: map[string]string{bkv1.TagClaim: "team-a/data", bkv1.TagUID: "1111-aaaa"}}},
		{name: "created bucket: what the spec does not name is removed",
			sb: newSpecBucket(), store: foreignStore(),
			wantWrites: []string{"PutBucketTagging", "DeleteBucketLifecycle", "DeleteBucketPolicy"},
			wantStore:  fakeS3{versioning: s3.VersioningEnabled, tags: map[string]string{bkv1.TagClaim: "team-a/data", bkv1.TagUID: "1111-aaaa"}}},
		{name: "long names are recorded as digests",
			sb: adoptedBucket(nil), store: &fakeS3{pab: &fullBlock},
			spec: func(s *bkv1.StorageBucketSpec) {
				s.Tags = map[string]string{strings.Repeat("k", 100): "v", "short": "v"}
			},
			wantWrites:  []string{"PutBucketTagging"},
			wantStore:   fakeS3{tags: map[string]string{strings.Repeat("k", 100): "v", "short": "v", bkv1.TagClaim: "team-a/data", bkv1.TagUID: "1111-aaaa"}},
			wantApplied: &bkv1.AppliedConfiguration{TagKeys: []string{appliedName(strings.Repeat("k", 100)), "short"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.spec != nil {
				tc.spec(&tc.sb.Spec)
			}
			f := tc.store
			r := &Reconciler{Clock: clocktesting.NewFakePassiveClock(time.Now()), SyncInterval: time.Hour}
			scope := &bucketScope{sb: tc.sb, owner: testOwner(tc.sb), store: &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "store", UID: "s1", Generation: 1}},
				s3: f, bucket: "b", syncing: true, created: true, policy: acceptedPolicy(t, tc.sb)}
			if err := r.reconcileConfiguration(t.Context(), scope); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(f.writes, tc.wantWrites) {
				t.Errorf("writes = %v, want %v", f.writes, tc.wantWrites)
			}
			if tc.wantReads != nil && !tc.wantReads(f.reads) {
				t.Errorf("reads = %v", f.reads)
			}
			w := tc.wantStore
			if f.versioning != w.versioning || !maps.Equal(f.tags, w.tags) || !reflect.DeepEqual(sortedRules(f.lifecycle), sortedRules(w.lifecycle)) || f.policy != w.policy {
				t.Errorf("store = versioning %q tags %v lifecycle %+v policy %q\nwant  versioning %q tags %v lifecycle %+v policy %q",
					f.versioning, f.tags, f.lifecycle, f.policy, w.versioning, w.tags, w.lifecycle, w.policy)
			}
			got := tc.sb.Status.Applied
			if got == nil || got.Hash == "" {
				t.Fatalf("status.applied = %+v, want a hash", got)
			}
			if tc.wantApplied != nil {
				want := *tc.wantApplied
				want.Hash = got.Hash
				if !reflect.DeepEqual(*got, want) {
					t.Errorf("status.applied = %+v, want %+v", *got, want)
				}
			}
			// A second pass over the converged store writes nothing.
			f.writes = nil
			if err := r.reconcileConfiguration(t.Context(), scope); err != nil || len(f.writes) != 0 {
				t.Errorf("second pass: writes %v, %v", f.writes, err)
			}
		})
	}
}

// TestAbsentSettingsRecordOnFailure: settings applied before a failing one are recorded
// (they are on the bucket), the failing one keeps its earlier record, and no hash of a
// configuration that was not fully applied is written.
func TestAbsentSettingsRecordOnFailure(t *testing.T) {
	sb := adoptedBucket(&bkv1.AppliedConfiguration{LifecycleRules: []string{"old"}, Hash: "before"})
	sb.Spec.Tags = map[string]string{"team": "data"}
	sb.Spec.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{{ID: "new", ExpirationDays: ptr.To[int32](1)}}}
	f := &fakeS3{errs: map[string]error{"PutBucketLifecycle": s3Err("PutBucketLifecycle", s3.KindThrottled)}}
	r := &Reconciler{Clock: clocktesting.NewFakePassiveClock(time.Now()), SyncInterval: time.Hour}
	scope := &bucketScope{sb: sb, owner: testOwner(sb), store: &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{UID: "s1"}}, s3: f, bucket: "b", syncing: true}
	if err := r.reconcileConfiguration(t.Context(), scope); err == nil {
		t.Fatal("want the lifecycle failure")
	}
	want := bkv1.AppliedConfiguration{TagKeys: []string{"team"}, LifecycleRules: []string{"old"}, Hash: "before"}
	if got := sb.Status.Applied; got == nil || !reflect.DeepEqual(*got, want) {
		t.Errorf("status.applied = %+v, want %+v", got, want)
	}
}

func TestTagLimitIsAClearError(t *testing.T) {
	found := map[string]string{}
	for i := range 46 { // 46 found + 3 spec + 2 ownership tags = 51
		found["found-"+strings.Repeat("x", i)] = "v"
	}
	sb := adoptedBucket(nil)
	sb.Spec.Tags = map[string]string{"a": "1", "b": "2", "c": "3"}
	f := &fakeS3{tags: found, pab: &fullBlock}
	r := &Reconciler{Clock: clocktesting.NewFakePassiveClock(time.Now()), SyncInterval: time.Hour}
	scope := &bucketScope{sb: sb, owner: testOwner(sb), store: &bkv1.ObjectStore{}, s3: f, bucket: "b", syncing: true}
	err := r.reconcileConfiguration(t.Context(), scope)
	se := reconcile.AsStepError(err, "")
	if err == nil || se.Reason != bkv1.ReasonInvalidTags || !se.Terminal || !strings.Contains(se.Message, "S3 allows 50") {
		t.Fatalf("error = %v (%+v), want a terminal InvalidTags naming the limit", err, se)
	}
	if len(f.writes) != 0 {
		t.Errorf("writes %v", f.writes)
	}

	// Adoption itself (tagging the bucket as this claim's) checks the same limit first.
	err = r.tagOwner(t.Context(), scope, found)
	if se := reconcile.AsStepError(err, ""); err == nil || se.Reason != bkv1.ReasonInvalidTags || !se.Terminal {
		t.Fatalf("adoption over the tag limit: %v", err)
	}
	if len(f.writes) != 0 {
		t.Errorf("writes %v", f.writes)
	}
}

func TestSyncSlot(t *testing.T) {
	const interval = time.Hour
	now := time.Date(2026, 12, 1, 0, 17, 3, 0, time.UTC)
	buckets := make([]int, 10)
	for i := range 2000 {
		uid := types.UID("uid-" + strings.Repeat("a", i%7) + string(rune('a'+i%26)) + time.Duration(i).String())
		slot := syncSlot(uid, interval, now)
		if !slot.After(now) || slot.After(now.Add(interval)) {
			t.Fatalf("slot %s not within (now, now+interval]", slot.Sub(now))
		}
		if again := syncSlot(uid, interval, now.Add(time.Minute)); again != slot && slot.Sub(now) > time.Minute {
			t.Fatalf("the slot moved with time: %s then %s", slot, again)
		}
		if next := syncSlot(uid, interval, slot); next.Sub(slot) != interval {
			t.Fatalf("the slot after a slot is %s later, want one interval", next.Sub(slot))
		}
		buckets[int(slot.Sub(now)*10/(interval+1))]++
	}
	for i, n := range buckets {
		if n < 120 || n > 280 {
			t.Errorf("tenth %d of the interval has %d of 2000 slots; want them spread (%v)", i, n, buckets)
		}
	}
}

// TestSyncDueAfterRestart: a fresh memo (a restart) leaves a settled bucket whose
// desired configuration matches status.applied.hash until its slot, and syncs at once a
// bucket whose configuration changed, whose record is missing, or that vanished.
func TestSyncDueAfterRestart(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const interval = 10 * time.Minute
	sb := newSpecBucket()
	sb.Status.BucketName = "b"
	for _, typ := range []string{bkv1.ConditionProvisioned, bkv1.ConditionConfigured, bkv1.ConditionReady} {
		reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, typ, metav1.ConditionTrue, "Fine", "fine")
	}
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "store", UID: "s1", Generation: 1}}
	scope := func() *bucketScope {
		return &bucketScope{sb: sb, owner: testOwner(sb), store: store, bucket: "b", region: "r"}
	}
	fresh := func() (*Reconciler, *clocktesting.FakePassiveClock) {
		clk := clocktesting.NewFakePassiveClock(t0)
		return &Reconciler{Clock: clk, SyncInterval: interval}, clk
	}
	sb.Status.Applied = &bkv1.AppliedConfiguration{Hash: desiredHash(scope(), testOwner(sb))}

	r, clk := fresh()
	if r.syncDue(scope()) {
		t.Fatal("after a restart, a settled bucket with a matching hash is due at once")
	}
	wait := r.syncRequeue(sb)
	if slot := syncSlot(sb.UID, interval, t0); wait != slot.Sub(t0) || wait <= 0 || wait > interval {
		t.Fatalf("requeue after %s, want the slot %s", wait, slot.Sub(t0))
	}
	clk.SetTime(t0.Add(wait - time.Second))
	if r.syncDue(scope()) {
		t.Fatal("due before its slot")
	}
	clk.SetTime(t0.Add(wait))
	if !r.syncDue(scope()) {
		t.Fatal("not due at its slot")
	}

	for name, change := range map[string]func() func(){
		"spec changed (new hash and generation)": func() func() {
			sb.Spec.Tags, sb.Generation = map[string]string{"new": "tag"}, 2
			return func() { sb.Spec.Tags, sb.Generation = nil, 1 }
		},
		"desired configuration changed without a new generation (cluster id, schema)": func() func() {
			old := sb.Status.Applied.Hash
			sb.Status.Applied.Hash = "0123456789abcdef"
			return func() { sb.Status.Applied.Hash = old }
		},
		"no record (written by an older operator)": func() func() {
			old := sb.Status.Applied
			sb.Status.Applied = nil
			return func() { sb.Status.Applied = old }
		},
		"not Ready": func() func() {
			reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionFalse, "Broken", "broken")
			return func() {
				reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionTrue, "Fine", "fine")
			}
		},
	} {
		undo := change()
		if r, _ := fresh(); !r.syncDue(scope()) {
			t.Errorf("%s: not due at once after a restart", name)
		}
		undo()
	}

	// The store lacks a setting the spec asks for: a stable verdict, no reason to rush.
	reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionConfigured, metav1.ConditionFalse, bkv1.ReasonNotSupportedByStore, "no lifecycle")
	reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonNotSupportedByStore, "no lifecycle")
	if r, _ := fresh(); r.syncDue(scope()) {
		t.Error("a bucket whose store lacks a setting is due at once after a restart")
	}

	r, _ = fresh()
	r.synced.expire(types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name})
	if !r.syncDue(scope()) {
		t.Error("a bucket known to have vanished is not due at once")
	}
}
