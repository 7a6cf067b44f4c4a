package storagebucket

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// uploadsBucket is a bucket of nothing but incomplete multipart uploads behind
// s3.Client, counting the requests a purge sends.
type uploadsBucket struct {
	s3.Client
	uploads  []s3.MultipartUpload
	requests int
	deleted  bool
}

func (b *uploadsBucket) ListMultipartUploads(context.Context, string, *s3.UploadPageToken) (s3.MultipartUploadPage, error) {
	b.requests++
	n := min(len(b.uploads), 1000)
	return s3.MultipartUploadPage{Uploads: append([]s3.MultipartUpload(nil), b.uploads[:n]...)}, nil
}

func (b *uploadsBucket) AbortMultipartUpload(_ context.Context, _, _, id string) error {
	b.requests++
	for i, u := range b.uploads {
		if u.UploadID == id {
			b.uploads = append(b.uploads[:i], b.uploads[i+1:]...)
			break
		}
	}
	return nil
}

func (b *uploadsBucket) ListObjectVersions(context.Context, string, *s3.PageToken) (s3.ObjectVersionPage, error) {
	b.requests++
	return s3.ObjectVersionPage{}, nil
}

func (b *uploadsBucket) DeleteBucket(context.Context, string) error {
	b.requests++
	b.deleted = true
	return nil
}

// TestPurgeSpendsOnlyItsBudget: a tenant's bucket with 300 incomplete uploads, each of
// which costs a request to abort, on a store whose purge budget is 10 requests a second
// with a burst of 20. No pass sends more than the budget has; each pass asks to wait
// until the budget refills; the purge still finishes and deletes the bucket.
func TestPurgeSpendsOnlyItsBudget(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	bucket := &uploadsBucket{}
	for i := range 300 {
		bucket.uploads = append(bucket.uploads, s3.MultipartUpload{Key: fmt.Sprintf("k%d", i), UploadID: fmt.Sprint(i)})
	}
	r := &Reconciler{Clock: clock, Recorder: events.NewFakeRecorder(100)}
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "big", UID: "u"}}
	budget := rate.NewLimiter(10, 20)
	budget.AllowN(clock.Now(), 0) // starts full at the fake clock's time
	spend := purgeSpender{budget: budget, now: clock.Now}

	passes := 0
	for !bucket.deleted {
		passes++
		if passes > 100 {
			t.Fatalf("not done after %d passes: %d uploads left", passes-1, len(bucket.uploads))
		}
		before := bucket.requests
		patcher := reconcile.NewStatusPatcher(nil, sb, func(sb *bkv1.StorageBucket) any { return sb.Status }, nil)
		done, err := r.purgeBucket(context.Background(), sb, patcher, purgeJob{key: sb.UID, c: bucket, bucket: "big", spend: spend})
		if err != nil {
			t.Fatal(err)
		}
		if sent := bucket.requests - before; sent > 20 {
			t.Fatalf("pass %d sent %d requests, more than the budget's burst of 20", passes, sent)
		}
		if done {
			break
		}
		wait := r.purges.nextPassIn(sb.UID, clock.Now())
		if len(bucket.uploads) > 0 && wait <= 0 {
			t.Fatalf("pass %d left %d uploads and the budget empty, yet asks for no wait", passes, len(bucket.uploads))
		}
		clock.Step(max(wait, time.Second))
	}
	if !bucket.deleted || len(bucket.uploads) != 0 {
		t.Fatalf("purge ended with %d uploads left, bucket deleted %v", len(bucket.uploads), bucket.deleted)
	}
	// 300 aborts and a few listings at 10 a second: about 30 s of the fake clock, in
	// passes of at most the burst.
	if passes < 300/20 {
		t.Errorf("%d passes: the budget did not pace the purge", passes)
	}
	t.Logf("%d passes, %d requests", passes, bucket.requests)
}

// TestPurgeWithABudgetSmallerThanAPass: a store of 10 requests a second and a burst of
// 10 leaves its purges a burst of 2, less than the least a pass sends (the listing of
// uploads, of versions, and a deletion). The purge still goes on, pass after pass, and
// spends no more than its budget over time: what a pass takes beyond the burst, the
// next waits for.
func TestPurgeWithABudgetSmallerThanAPass(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	start := clock.Now()
	bucket := &uploadsBucket{}
	for i := range 5 {
		bucket.uploads = append(bucket.uploads, s3.MultipartUpload{Key: fmt.Sprintf("k%d", i), UploadID: fmt.Sprint(i)})
	}
	r := &Reconciler{Clock: clock, Recorder: events.NewFakeRecorder(100)}
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "small", UID: "u"}}
	budget := rate.NewLimiter(2.5, 2)
	budget.AllowN(clock.Now(), 0)
	for passes := 1; !bucket.deleted; passes++ {
		if passes > 20 {
			t.Fatalf("not done after %d passes: %d uploads left", passes-1, len(bucket.uploads))
		}
		patcher := reconcile.NewStatusPatcher(nil, sb, func(sb *bkv1.StorageBucket) any { return sb.Status }, nil)
		if _, err := r.purgeBucket(context.Background(), sb, patcher, purgeJob{key: sb.UID, c: bucket, bucket: "small", spend: purgeSpender{budget: budget, now: clock.Now}}); err != nil {
			t.Fatal(err)
		}
		clock.Step(max(r.purges.nextPassIn(sb.UID, clock.Now()), 10*time.Millisecond))
	}
	elapsed := clock.Since(start).Seconds()
	if allowed := 2 + 2.5*elapsed; float64(bucket.requests) > allowed+1 { // DeleteBucket is not charged
		t.Errorf("%d requests in %.1f s, more than the budget's %.1f", bucket.requests, elapsed, allowed)
	}
}

// TestDeletionWaitsForAnUnansweredCreate: a claim whose CreateBucket went unanswered is
// deleted. The store says the bucket is not there, which proves nothing while the
// create may still be carried out: the deletion waits, says why on Ready and by an
// Event, and only once the create can no longer land concludes there is nothing to
// delete. A bucket it deletes meanwhile is looked for again once that time has passed.
func TestDeletionWaitsForAnUnansweredCreate(t *testing.T) {
	for _, tc := range []struct {
		name string
		// seen: this process sent the create and saw it go unanswered; otherwise
		// another process sent it (a restart), known only from status.
		seen   bool
		absent bool
	}{
		{name: "not there, create seen unanswered", seen: true, absent: true},
		{name: "not there, create sent before a restart", absent: true},
		{name: "there, untagged: the create landed", seen: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bucket := &fakeS3{absent: tc.absent}
			g := newRig(t, bucket)
			sent := g.clock.Now()
			g.intentSentAt(sent)
			landBy := sent.Add(time.Second + rigDeadline + rigSettle)
			if tc.seen {
				landBy = sent.Add(rigDeadline + rigSettle) // the call ended at its deadline
				g.r.creates.ended(client.ObjectKeyFromObject(g.sb), g.sb.UID, g.sb.Status.CreateIntent.SentAt.Time, landBy)
			}
			g.clock.Step(rigDeadline + time.Second)

			done, retryIn, err := g.r.deleteExternal(context.Background(), g.sb, g.patcher())
			if err != nil || done {
				t.Fatalf("while the create may land: done %v, err %v; want to wait", done, err)
			}
			if want := landBy.Sub(g.clock.Now()); retryIn != want {
				t.Errorf("looks again in %v, want %v (when the create can no longer land)", retryIn, want)
			}
			c := reconcile.FindCondition(g.sb.Status.Conditions, bkv1.ConditionReady)
			if c == nil || c.Reason != bkv1.ReasonCreateUnanswered || !strings.Contains(c.Message, "looks again") {
				t.Errorf("Ready = %+v, want CreateUnanswered saying when it looks again", c)
			}
			first := g.drained()
			if tc.absent && (hasEvent(first, bkv1.EventReasonBucketAbsent) || hasEvent(first, bkv1.EventReasonBucketDeleted)) {
				t.Errorf("a decision was announced while the create may land: %v", first)
			}
			if !tc.absent && (!hasEvent(first, bkv1.EventReasonBucketDeleted) || !bucket.absent) {
				t.Errorf("the landed bucket was not deleted and announced: %v", first)
			}

			g.clock.Step(retryIn)
			done, _, err = g.r.deleteExternal(context.Background(), g.sb, g.patcher())
			if err != nil || !done {
				t.Fatalf("once no create can land: done %v, err %v; want done", done, err)
			}
			if ev := g.drained(); !hasEvent(ev, bkv1.EventReasonBucketAbsent) {
				t.Errorf("events %v, want %s", ev, bkv1.EventReasonBucketAbsent)
			}
		})
	}
}

// TestDeletionNeverTakesNoAnswerForNothing: when the store does not answer, a Delete
// claim waits, whether or not it recorded a bucket; a Retain claim goes (the bucket
// stays either way) and says it could not ask, but for one whose bucket it created may
// lack its tags, which waits to release it. A bucket these credentials may not even
// see is not one a claim that recorded none created or bound.
func TestDeletionNeverTakesNoAnswerForNothing(t *testing.T) {
	timeout := &s3.Error{Op: "HeadBucket", Bucket: rigBucket, Kind: s3.KindTimeout}
	denied := &s3.Error{Op: "HeadBucket", Bucket: rigBucket, Kind: s3.KindAccessDenied, StatusCode: 403}
	intent := func(sb *bkv1.StorageBucket) {
		at := metav1.NewTime(time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC))
		sb.Status.CreateIntent = &bkv1.CreateIntent{BucketName: rigBucket, UID: sb.UID, SentAt: &at}
	}
	retain := func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyRetain }
	// Tagged and recorded; its conditions False, as a store refusing the operator's
	// credentials leaves them.
	provisioned := func(sb *bkv1.StorageBucket) {
		sb.Status.BucketName = rigBucket
		sb.Status.Conditions = []metav1.Condition{{Type: bkv1.ConditionProvisioned, Status: metav1.ConditionFalse, Reason: bkv1.ReasonCredentialsInvalid}}
	}
	for _, tc := range []struct {
		name    string
		headErr error
		mutate  []func(*bkv1.StorageBucket)
		done    bool
		event   string
	}{
		{name: "Delete, nothing recorded, no answer", headErr: timeout},
		{name: "Delete, intent recorded, no answer", headErr: timeout, mutate: []func(*bkv1.StorageBucket){intent}},
		{name: "Retain, no answer", headErr: timeout, mutate: []func(*bkv1.StorageBucket){retain}, done: true, event: bkv1.EventReasonBucketNotReleased},
		{name: "Retain, tagged bucket it created, no answer", headErr: timeout, mutate: []func(*bkv1.StorageBucket){retain, intent, provisioned},
			done: true, event: bkv1.EventReasonBucketNotReleased},
		// Created, maybe never tagged: left now, nobody could bind or delete it.
		{name: "Retain, intent recorded, no answer", headErr: timeout, mutate: []func(*bkv1.StorageBucket){retain, intent}},
		{name: "Delete, nothing recorded, access denied", headErr: denied, done: true, event: bkv1.EventReasonBucketLeftAlone},
		{name: "Delete, intent recorded, access denied", headErr: denied, mutate: []func(*bkv1.StorageBucket){intent}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := map[string]error{"HeadBucket": tc.headErr}
			if tc.headErr == denied {
				// Credentials that may not see the bucket read none of it: a HEAD
				// refused alone (a tenant's Deny of s3:ListBucket) is looked past.
				errs["GetBucketTagging"] = &s3.Error{Op: "GetBucketTagging", Bucket: rigBucket, Kind: s3.KindAccessDenied, StatusCode: 403}
			}
			g := newRig(t, &fakeS3{errs: errs}, tc.mutate...)
			done, _, err := g.r.deleteExternal(context.Background(), g.sb, g.patcher())
			if done != tc.done || (err == nil) != tc.done {
				t.Fatalf("done %v, err %v; want done %v", done, err, tc.done)
			}
			if ev := g.drained(); tc.event != "" && !hasEvent(ev, tc.event) {
				t.Errorf("events %v, want %s", ev, tc.event)
			}
		})
	}
}

// TestPurgeLiftsTheOperatorsPolicyFirst: before a purge's first pass the operator
// deletes the policy it set, once, so a tenant's Deny of the data actions a purge lists
// and deletes with cannot keep the claim from being deleted; a store that refuses the
// deletion does not stop the purge. A policy the operator never set (an adopted
// bucket's) stays.
func TestPurgeLiftsTheOperatorsPolicyFirst(t *testing.T) {
	ctx := context.Background()
	r := &Reconciler{}
	mine := newSpecBucket() // its create intent names bucket "b"
	f := &fakeS3{policy: `{"Statement":[]}`}
	for range 2 {
		if err := r.liftPolicyBeforePurge(ctx, mine, f, "b"); err != nil {
			t.Fatal(err)
		}
	}
	if f.policy != "" || len(f.writes) != 1 {
		t.Errorf("policy %q after writes %v; want it deleted, once", f.policy, f.writes)
	}

	adopted := newSpecBucket()
	adopted.UID, adopted.Status.CreateIntent = "2222-bbbb", nil
	f = &fakeS3{policy: `{"Statement":[]}`}
	if err := r.liftPolicyBeforePurge(ctx, adopted, f, "b"); err != nil || len(f.writes) != 0 {
		t.Errorf("adopted bucket: err = %v, writes %v; want its policy left alone", err, f.writes)
	}

	refused := newSpecBucket()
	refused.UID, refused.Status.CreateIntent.UID = "3333-cccc", "3333-cccc"
	f = &fakeS3{policy: `{"Statement":[]}`, errs: map[string]error{"DeleteBucketPolicy": s3Err("DeleteBucketPolicy", s3.KindAccessDenied)}}
	if err := r.liftPolicyBeforePurge(ctx, refused, f, "b"); err != nil {
		t.Errorf("refused by the store: err = %v, want the purge to go on", err)
	}
	f = &fakeS3{errs: map[string]error{"DeleteBucketPolicy": s3Err("DeleteBucketPolicy", s3.KindUnreachable)}}
	other := newSpecBucket()
	other.UID, other.Status.CreateIntent.UID = "4444-dddd", "4444-dddd"
	if err := r.liftPolicyBeforePurge(ctx, other, f, "b"); err == nil {
		t.Error("unreachable store: no error, want the pass retried")
	}
}

// TestDeleteOfALockedBucketIsBoundedAsAPurge: a Delete claim whose bucket holds a
// version under Governance retention and one under a legal hold, with the store's
// releaseBlockedDeletionAfter of two days. Its deletion deletes nothing, reports
// DeletionBlocked (not BucketNotEmpty, whose remedy, emptying the bucket, nobody can
// follow) with the metric and what the tenant may do (deletionPolicy Purge, the Orphan
// annotation), looks again when the retention ends, at the earliest a minute later
// whatever the sync interval, and when the wait ends keeps the bucket, released and
// tagged as a Delete blocked, and is done. A bucket with nothing locked in it is
// BucketNotEmpty as before.
func TestDeleteOfALockedBucketIsBoundedAsAPurge(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b := &lockedBucket{versions: []string{"gov", "held"}, held: map[string]bool{"held": true},
		retention: map[string]s3.ObjectRetention{"gov": {Mode: s3.RetentionGovernance, Until: start.Add(24 * time.Hour)}}}
	p := newPurgeRun(t, b, false, 48*time.Hour)
	p.r.SyncInterval = 4 * time.Second
	pass := func() (bool, time.Duration) {
		t.Helper()
		patcher := reconcile.NewStatusPatcher(nil, p.sb, func(sb *bkv1.StorageBucket) any { return sb.Status }, nil)
		done, wait, err := p.r.deleteBucket(context.Background(), p.sb, patcher, purgeJob{key: p.sb.UID, c: b, bucket: "b", spend: purgeSpender{now: p.clock.Now}, lock: p.lock})
		if err != nil {
			t.Fatalf("pass at %s: %v", p.clock.Now().Format(time.RFC3339), err)
		}
		return done, wait
	}

	done, wait := pass()
	if done || len(b.versions) != 2 || b.deleted {
		t.Fatalf("first pass: done %v, versions %v, deleted %v; want nothing deleted", done, b.versions, b.deleted)
	}
	c := p.ready()
	if c == nil || c.Reason != bkv1.ReasonDeletionBlocked {
		t.Fatalf("Ready %+v, want DeletionBlocked", c)
	}
	for _, want := range []string{"deletionPolicy Delete deletes only an empty bucket", "2 object versions an object lock keeps", "1 under Governance retention",
		"1 under a legal hold", "at 2026-12-03T12:00:00Z", "set deletionPolicy Purge", bkv1.AnnotationDeletionPolicy} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message lacks %q: %s", want, c.Message)
		}
	}
	if strings.Contains(c.Message, "empty it") {
		t.Errorf("the message asks to empty a bucket nobody may empty: %s", c.Message)
	}
	if wait != 24*time.Hour || len(p.metric) != 1 {
		t.Errorf("asks to wait %v (want until the retention ends, 24h), metric %v", wait, p.metric)
	}

	// The retention ends; the legal hold stays, which has no date: a minute, not the
	// sync interval of 4 s.
	p.clock.Step(wait)
	if done, wait = pass(); done || wait != time.Minute {
		t.Errorf("a day later: done %v, wait %v; want blocked, back in a minute", done, wait)
	}
	p.clock.Step(24 * time.Hour)
	if done, _ = pass(); !done || len(p.released) != 1 || !strings.HasPrefix(p.released[0], "Delete blocked by 1 locked object versions") || len(b.versions) != 2 {
		t.Fatalf("at the end of the wait: done %v, released %q, versions %v", done, p.released, b.versions)
	}

	// Nothing locked: the tenant can empty it.
	free := &lockedBucket{versions: []string{"a"}}
	q := newPurgeRun(t, free, false, time.Hour)
	patcher := reconcile.NewStatusPatcher(nil, q.sb, func(sb *bkv1.StorageBucket) any { return sb.Status }, nil)
	_, _, err := q.r.deleteBucket(context.Background(), q.sb, patcher, purgeJob{key: q.sb.UID, c: free, bucket: "b", spend: purgeSpender{now: q.clock.Now}, lock: q.lock})
	if se := reconcile.AsStepError(err, ""); err == nil || se.Reason != bkv1.ReasonBucketNotEmpty {
		t.Errorf("a bucket with nothing locked: %v, want BucketNotEmpty", err)
	}
}
