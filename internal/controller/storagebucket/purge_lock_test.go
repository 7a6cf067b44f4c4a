package storagebucket

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// lockedBucket is a versioned bucket behind s3.Client whose versions may be locked as a
// store locks them: DeleteObjects refuses a locked version with AccessDenied (the
// bypass deletes a Governance one), and the retention, legal hold and default retention
// are read as the stores report them. Listings are pages of pageSize, in key order,
// after the KeyMarker.
type lockedBucket struct {
	s3.Client
	now       func() time.Time
	versions  []string // keys, one version each, sorted
	retention map[string]s3.ObjectRetention
	held      map[string]bool
	// byDefault locks every version without a retention of its own (Versity), unless
	// perVersion: the store gave each version written under it a retention of its own
	// (SeaweedFS, Ceph RGW), and a version without one predates it.
	byDefault  *s3.DefaultRetention
	perVersion bool
	pageSize   int
	lists      []string // the KeyMarker of each listing
	deleted    bool
	// noLock: the bucket has no object lock at all.
	noLock bool
	// refusal is how DeleteObjects refuses a locked version: AccessDenied unless set
	// (MinIO: InvalidRequest, "Object is WORM protected and cannot be overwritten").
	refusal s3.ObjectError
}

func (b *lockedBucket) ListMultipartUploads(context.Context, string, *s3.UploadPageToken) (s3.MultipartUploadPage, error) {
	return s3.MultipartUploadPage{}, nil
}

func (b *lockedBucket) ListObjectVersions(_ context.Context, _ string, page *s3.PageToken) (s3.ObjectVersionPage, error) {
	marker := ""
	if page != nil {
		marker = page.KeyMarker
	}
	b.lists = append(b.lists, marker)
	var out s3.ObjectVersionPage
	for _, k := range b.versions {
		if k <= marker {
			continue
		}
		if len(out.Versions) == b.pageSize {
			out.Next = &s3.PageToken{KeyMarker: out.Versions[len(out.Versions)-1].Key, VersionIDMarker: "v"}
			break
		}
		out.Versions = append(out.Versions, s3.ObjectVersion{Key: k, VersionID: "v"})
	}
	return out, nil
}

func (b *lockedBucket) locked(key string, bypass bool) bool {
	if r, ok := b.retention[key]; ok && r.Until.After(b.now()) {
		return r.Mode == s3.RetentionCompliance || !bypass
	}
	if b.held[key] {
		return true
	}
	if _, own := b.retention[key]; !own && b.byDefault != nil && !b.perVersion {
		return b.byDefault.Mode == s3.RetentionCompliance || !bypass
	}
	return false
}

func (b *lockedBucket) deleteObjects(ids []s3.ObjectID, bypass bool) error {
	failed := &s3.DeleteObjectsError{Bucket: "b", Total: len(ids)}
	for _, id := range ids {
		if b.locked(id.Key, bypass) {
			refusal := s3.ObjectError{Key: id.Key, VersionID: id.VersionID, Code: "AccessDenied"}
			if b.refusal.Code != "" {
				refusal.Code, refusal.Message = b.refusal.Code, b.refusal.Message
			}
			failed.Failed = append(failed.Failed, refusal)
			continue
		}
		b.versions = slices.DeleteFunc(b.versions, func(k string) bool { return k == id.Key })
	}
	if len(failed.Failed) > 0 {
		return failed
	}
	return nil
}

func (b *lockedBucket) DeleteObjects(_ context.Context, _ string, ids []s3.ObjectID) error {
	return b.deleteObjects(ids, false)
}

func (b *lockedBucket) DeleteObjectsBypassingGovernance(_ context.Context, _ string, ids []s3.ObjectID) error {
	return b.deleteObjects(ids, true)
}

func (b *lockedBucket) GetObjectRetention(_ context.Context, _, key, _ string) (s3.ObjectRetention, error) {
	return b.retention[key], nil
}

func (b *lockedBucket) GetObjectLegalHold(_ context.Context, _, key, _ string) (bool, error) {
	return b.held[key], nil
}

func (b *lockedBucket) GetObjectLockConfiguration(context.Context, string) (s3.ObjectLockConfig, error) {
	if b.noLock {
		return s3.ObjectLockConfig{}, nil
	}
	return s3.ObjectLockConfig{Enabled: true, DefaultRetention: b.byDefault}, nil
}

func (b *lockedBucket) DeleteBucket(context.Context, string) error {
	if len(b.versions) > 0 {
		return &s3.Error{Op: "DeleteBucket", Bucket: "b", Kind: s3.KindNotEmpty, Code: "BucketNotEmpty"}
	}
	b.deleted = true
	return nil
}

// purgeRun drives purgeBucket pass by pass on a fake clock, as the controller would.
type purgeRun struct {
	t        *testing.T
	clock    *clocktesting.FakeClock
	r        *Reconciler
	sb       *bkv1.StorageBucket
	bucket   *lockedBucket
	lock     purgeLock
	released []string
	metric   []time.Time
}

func newPurgeRun(t *testing.T, b *lockedBucket, bypass bool, releaseAfter time.Duration) *purgeRun {
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	b.now = clock.Now
	if b.pageSize == 0 {
		b.pageSize = 1000
	}
	slices.Sort(b.versions)
	p := &purgeRun{t: t, clock: clock, bucket: b,
		sb: &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "locked", UID: "u"}}}
	p.r = &Reconciler{Clock: clock, Recorder: events.NewFakeRecorder(100), SyncInterval: 10 * time.Minute,
		OnDeletionBlocked: func(_ types.NamespacedName, since *time.Time) { p.metric = append(p.metric, *since) }}
	p.lock = purgeLock{bypass: bypass, releaseAfter: releaseAfter, store: "s",
		release: func(_ context.Context, tag string) error { p.released = append(p.released, tag); return nil }}
	return p
}

// pass runs one purge pass and returns whether it finished and how long it asks to wait.
func (p *purgeRun) pass() (bool, time.Duration) {
	p.t.Helper()
	patcher := reconcile.NewStatusPatcher(nil, p.sb, func(sb *bkv1.StorageBucket) any { return sb.Status }, nil)
	done, err := p.r.purgeBucket(context.Background(), p.sb, patcher, purgeJob{key: p.sb.UID, c: p.bucket, bucket: "b", spend: purgeSpender{now: p.clock.Now}, lock: p.lock})
	if err != nil {
		p.t.Fatalf("pass at %s: %v", p.clock.Now().Format(time.RFC3339), err)
	}
	return done, p.r.purges.nextPassIn(p.sb.UID, p.clock.Now())
}

func (p *purgeRun) ready() *metav1.Condition {
	return reconcile.FindCondition(p.sb.Status.Conditions, bkv1.ConditionReady)
}

func keys(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s%04d", prefix, i))
	}
	return out
}

// TestPurgeWaitsForLockedVersions: a purge deletes what is not locked, reports
// DeletionBlocked with the earliest and last end of the retentions it found and when the
// claim stops waiting, asks to come back when the first version unlocks, then deletes it,
// and when the wait ends keeps the bucket (released, tagged) instead: done, with the
// locked versions still there. Compliance is never bypassed.
func TestPurgeWaitsForLockedVersions(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b := &lockedBucket{versions: append(keys("free", 3), "gov", "comp", "held"),
		retention: map[string]s3.ObjectRetention{
			"gov":  {Mode: s3.RetentionGovernance, Until: start.Add(24 * time.Hour)},
			"comp": {Mode: s3.RetentionCompliance, Until: start.Add(72 * time.Hour)},
		},
		held: map[string]bool{"held": true}}
	p := newPurgeRun(t, b, false, 48*time.Hour)

	done, wait := p.pass()
	if done || !slices.Equal(b.versions, []string{"comp", "gov", "held"}) {
		t.Fatalf("after the first pass: done %v, versions %v; want the three locked ones left", done, b.versions)
	}
	c := p.ready()
	if c == nil || c.Reason != bkv1.ReasonDeletionBlocked {
		t.Fatalf("Ready: %+v, want DeletionBlocked", c)
	}
	for _, want := range []string{"3 object versions left are locked", "1 under Governance retention", "1 under Compliance retention", "1 under a legal hold",
		"the first retention found ends at 2026-12-02T12:00:00Z", "a legal hold lasts until", "purgeMayBypassGovernance", "at 2026-12-03T12:00:00Z"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message lacks %q: %s", want, c.Message)
		}
	}
	blocked := p.sb.Status.DeletionBlocked
	if blocked == nil || blocked.LockedVersions != 3 || blocked.Until != nil || !blocked.Since.Time.Equal(start) || !blocked.ReleaseAt.Time.Equal(start.Add(48*time.Hour)) {
		t.Fatalf("status.deletionBlocked %+v", blocked)
	}
	if wait != 24*time.Hour {
		t.Errorf("asks to wait %v, want until the Governance retention ends (24h)", wait)
	}
	if len(p.metric) != 1 || !p.metric[0].Equal(start) {
		t.Errorf("metric reports %v", p.metric)
	}

	// The Governance retention ends: the next pass deletes that version.
	p.clock.Step(wait)
	done, _ = p.pass()
	if done || !slices.Equal(b.versions, []string{"comp", "held"}) {
		t.Fatalf("a day later: done %v, versions %v", done, b.versions)
	}
	if got := p.sb.Status.DeletionBlocked; got.LockedVersions != 2 || !got.Since.Time.Equal(start) {
		t.Errorf("status.deletionBlocked keeps its start: %+v", got)
	}

	// The wait ends before the Compliance retention and the legal hold do.
	p.clock.Step(24 * time.Hour)
	done, _ = p.pass()
	if !done || len(p.released) != 1 || !slices.Equal(b.versions, []string{"comp", "held"}) {
		t.Fatalf("at the end of the wait: done %v, released %v, versions %v", done, p.released, b.versions)
	}
	if tag := p.released[0]; !strings.Contains(tag, "2 locked object versions") || !strings.Contains(tag, "legal hold") {
		t.Errorf("the bucket's tag says %q", tag)
	}
}

// TestPurgeBypassesGovernanceOnlyWhenAllowed: with the store's
// purgeMayBypassGovernance a Governance retention is bypassed; Compliance never is, and
// the claim reports when it ends (Until: every version read has a date).
func TestPurgeBypassesGovernanceOnlyWhenAllowed(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b := &lockedBucket{versions: []string{"gov", "comp"}, retention: map[string]s3.ObjectRetention{
		"gov":  {Mode: s3.RetentionGovernance, Until: start.Add(24 * time.Hour)},
		"comp": {Mode: s3.RetentionCompliance, Until: start.Add(72 * time.Hour)},
	}}
	p := newPurgeRun(t, b, true, 24*time.Hour)
	if done, _ := p.pass(); done || !slices.Equal(b.versions, []string{"comp"}) {
		t.Fatalf("done %v, versions %v; want the Compliance version alone left", done, b.versions)
	}
	blocked := p.sb.Status.DeletionBlocked
	if blocked == nil || blocked.Until == nil || !blocked.Until.Time.Equal(start.Add(72*time.Hour)) {
		t.Fatalf("status.deletionBlocked %+v, want until the Compliance retention ends", blocked)
	}
	if strings.Contains(p.ready().Message, "purgeMayBypassGovernance") {
		t.Errorf("the message suggests the bypass, which is on: %s", p.ready().Message)
	}

	// Without the bypass, a lone Governance version blocks too.
	b2 := &lockedBucket{versions: []string{"gov"}, retention: map[string]s3.ObjectRetention{"gov": {Mode: s3.RetentionGovernance, Until: start.Add(time.Hour)}}}
	p2 := newPurgeRun(t, b2, false, 24*time.Hour)
	if done, wait := p2.pass(); done || len(b2.versions) != 1 || wait != time.Hour {
		t.Fatalf("without the bypass: done %v, versions %v, wait %v", done, b2.versions, wait)
	}
}

// TestPurgeOfVersionsMinIORefusesAsWORMProtected: MinIO refuses to delete a locked
// version with InvalidRequest ("Object is WORM protected and cannot be overwritten"),
// not AccessDenied (internal/s3's contract tests pin it). The purge reads such a
// version's lock as it reads an AccessDenied one's: what is not locked is deleted, the
// claim DeletionBlocked until the retention ends; and the same InvalidRequest for a
// version nothing locks stays the store's refusal.
func TestPurgeOfVersionsMinIORefusesAsWORMProtected(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	worm := s3.ObjectError{Code: "InvalidRequest", Message: "Object is WORM protected and cannot be overwritten"}
	b := &lockedBucket{versions: []string{"free", "gov"}, refusal: worm,
		retention: map[string]s3.ObjectRetention{"gov": {Mode: s3.RetentionGovernance, Until: start.Add(24 * time.Hour)}}}
	p := newPurgeRun(t, b, false, 48*time.Hour)
	if done, wait := p.pass(); done || !slices.Equal(b.versions, []string{"gov"}) || wait != 24*time.Hour {
		t.Fatalf("done %v, versions %v, wait %v; want the locked version left until its retention ends", done, b.versions, wait)
	}
	if c := p.ready(); c == nil || c.Reason != bkv1.ReasonDeletionBlocked {
		t.Fatalf("Ready: %+v, want DeletionBlocked", c)
	}
	if blocked := p.sb.Status.DeletionBlocked; blocked == nil || blocked.Until == nil || !blocked.Until.Time.Equal(start.Add(24*time.Hour)) {
		t.Fatalf("status.deletionBlocked %+v, want until the Governance retention ends", blocked)
	}

	// Another InvalidRequest, or this one for a version nothing locks, is no lock.
	for _, refusal := range []s3.ObjectError{{Code: "InvalidRequest", Message: "something else"}, worm} {
		b := &lockedBucket{versions: []string{"a"}, refusal: refusal, held: map[string]bool{"a": true}}
		p := newPurgeRun(t, b, false, time.Hour)
		if refusal == worm {
			b.held = nil // refused all the same, below
		}
		refused := &refusingBucket{lockedBucket: b, refusal: refusal}
		patcher := reconcile.NewStatusPatcher(nil, p.sb, func(sb *bkv1.StorageBucket) any { return sb.Status }, nil)
		_, err := p.r.purgeBucket(context.Background(), p.sb, patcher, purgeJob{key: p.sb.UID, c: refused, bucket: "b", spend: purgeSpender{now: p.clock.Now}, lock: p.lock})
		if err == nil || !strings.Contains(err.Error(), "InvalidRequest") || p.sb.Status.DeletionBlocked != nil {
			t.Errorf("%s %q: error %v, deletionBlocked %+v; want the store's refusal, not blocked", refusal.Code, refusal.Message, err, p.sb.Status.DeletionBlocked)
		}
	}
}

// TestPurgeOfABucketLockedByItsDefault: on a store that keeps no retention per version
// (Versity), the bucket's default retention locks them: reported as such, without a
// date, and bypassed like any Governance retention when allowed.
func TestPurgeOfABucketLockedByItsDefault(t *testing.T) {
	b := &lockedBucket{versions: []string{"a", "b"}, byDefault: &s3.DefaultRetention{Mode: s3.RetentionGovernance, Days: 1}}
	p := newPurgeRun(t, b, false, time.Hour)
	if done, wait := p.pass(); done || wait != 10*time.Minute {
		t.Fatalf("done %v, wait %v; want blocked, back in a sync interval", done, wait)
	}
	if msg := p.ready().Message; !strings.Contains(msg, "2 under the bucket's default retention (Governance, 1 day), which this store counts from when it was set") {
		t.Errorf("message: %s", msg)
	}
	if p.sb.Status.DeletionBlocked.Until != nil {
		t.Errorf("Until %v, want none: the store reports no date", p.sb.Status.DeletionBlocked.Until)
	}
	p.lock.bypass = true
	if done, _ := p.pass(); done || len(b.versions) != 0 {
		t.Fatalf("with the bypass: done %v, versions %v", done, b.versions)
	}
	if done, _ := p.pass(); !done || !b.deleted {
		t.Fatalf("the empty bucket: done %v, deleted %v", done, b.deleted)
	}
}

// TestPurgeRefusalNoLockExplains: a version refused though nothing locks it is the
// store's refusal, reported as it was before object lock.
func TestPurgeRefusalNoLockExplains(t *testing.T) {
	b := &lockedBucket{versions: []string{"a"}, held: map[string]bool{}}
	p := newPurgeRun(t, b, false, time.Hour)
	b.retention = map[string]s3.ObjectRetention{"a": {Mode: s3.RetentionGovernance, Until: p.clock.Now().Add(-time.Hour)}} // ended
	b.byDefault = nil
	// The store refuses it anyway.
	denied := &refusingBucket{lockedBucket: b}
	patcher := reconcile.NewStatusPatcher(nil, p.sb, func(sb *bkv1.StorageBucket) any { return sb.Status }, nil)
	_, err := p.r.purgeBucket(context.Background(), p.sb, patcher, purgeJob{key: p.sb.UID, c: denied, bucket: "b", spend: purgeSpender{now: p.clock.Now}, lock: p.lock})
	if err == nil || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("error %v, want the store's AccessDenied", err)
	}
	if p.sb.Status.DeletionBlocked != nil {
		t.Errorf("reported blocked: %+v", p.sb.Status.DeletionBlocked)
	}
}

// refusingBucket refuses every version it is asked to delete: AccessDenied unless
// refusal says otherwise.
type refusingBucket struct {
	*lockedBucket
	refusal s3.ObjectError
}

func (b *refusingBucket) DeleteObjects(_ context.Context, _ string, ids []s3.ObjectID) error {
	failed := &s3.DeleteObjectsError{Bucket: "b", Total: len(ids)}
	for _, id := range ids {
		refusal := s3.ObjectError{Key: id.Key, VersionID: id.VersionID, Code: cmp.Or(b.refusal.Code, "AccessDenied"), Message: b.refusal.Message}
		failed.Failed = append(failed.Failed, refusal)
	}
	return failed
}

// TestPurgeListsPastLockedVersions: 2,500 locked versions come first in key order and
// 500 free ones after them; passes of five pages would list the locked ones over and
// over if each started at the first page. Each pass goes on after the last locked
// version found, so the free ones are deleted within a few passes.
func TestPurgeListsPastLockedVersions(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	retention := map[string]s3.ObjectRetention{}
	for _, k := range keys("a-locked", 2500) {
		retention[k] = s3.ObjectRetention{Mode: s3.RetentionCompliance, Until: start.Add(time.Hour)}
	}
	b := &lockedBucket{versions: append(keys("a-locked", 2500), keys("z-free", 500)...), retention: retention, pageSize: 500}
	p := newPurgeRun(t, b, false, 24*time.Hour)
	for pass := 1; len(b.versions) > 2500; pass++ {
		if pass > 3 {
			t.Fatalf("%d free versions left after %d passes; listings from %v", len(b.versions)-2500, pass-1, b.lists)
		}
		if done, _ := p.pass(); done {
			t.Fatal("done with locked versions left")
		}
	}
	if got := p.sb.Status.DeletionBlocked; got == nil || got.LockedVersions != 2500 {
		t.Errorf("status.deletionBlocked %+v, want 2500 locked", got)
	}
}

// TestSurveyLocksOfADeleteClaim: a Delete asks what locks the versions of a bucket it
// found not empty, deleting nothing. A bucket without object lock has no locked
// versions; on a store that gives each version a retention of its own, a version
// without one was written before the default and is not locked; on one that gives none
// (Versity), the default locks every version; versions past the lookups leave the
// tally partial, without a date.
func TestSurveyLocksOfADeleteClaim(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	day := &s3.DefaultRetention{Mode: s3.RetentionGovernance, Days: 1}
	for _, tc := range []struct {
		name                string
		bucket              *lockedBucket
		versions, defaulted int64
		partial             bool
	}{
		{name: "no object lock", bucket: &lockedBucket{versions: []string{"a"}, noLock: true}},
		{name: "nothing locked", bucket: &lockedBucket{versions: []string{"a", "b"}}},
		{name: "retention per version", bucket: &lockedBucket{versions: []string{"before", "under"}, byDefault: day, perVersion: true,
			retention: map[string]s3.ObjectRetention{"under": {Mode: s3.RetentionGovernance, Until: start.Add(24 * time.Hour)}}}, versions: 1},
		{name: "the default locks them all", bucket: &lockedBucket{versions: []string{"a", "b"}, byDefault: day}, versions: 2, defaulted: 2},
		{name: "a legal hold", bucket: &lockedBucket{versions: []string{"a", "b"}, held: map[string]bool{"b": true}}, versions: 1},
		{name: "more than the lookups", bucket: &lockedBucket{versions: keys("k", purgeLockLookups+5), held: map[string]bool{"k0000": true}}, versions: 1, partial: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.bucket
			b.now, b.pageSize = func() time.Time { return start }, 1000
			before := slices.Clone(b.versions)
			got, err := surveyLocks(context.Background(), purgeJob{c: b, bucket: "b", spend: purgeSpender{now: b.now}}, start)
			if err != nil {
				t.Fatal(err)
			}
			if got.versions != tc.versions || got.defaulted != tc.defaulted || got.partial != tc.partial {
				t.Errorf("tally %+v, want %d locked, %d by the default, partial %v", got, tc.versions, tc.defaulted, tc.partial)
			}
			if !slices.Equal(b.versions, before) {
				t.Errorf("versions %v after the survey, want %v: it deletes nothing", b.versions, before)
			}
		})
	}
}
