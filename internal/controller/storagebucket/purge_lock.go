package storagebucket

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// A Purge never breaks an object lock. It deletes what it may (versions under
// Governance retention too, where the store's admin allows it with
// guardrails.objectLock.purgeMayBypassGovernance; never Compliance, which no store lets
// anyone bypass), and a listing that finds nothing left but locked versions reports
// DeletionBlocked with what locks them and until when, and tries again when the first
// of them unlocks. The claim does not wait forever: after the store's
// guardrails.objectLock.releaseBlockedDeletionAfter the bucket is kept as with Retain,
// its locked versions on it, tagged bucketkeeper.io/deletion-blocked for the store's
// admin, and the finalizer goes, so a namespace being deleted has a defined end.

// purgeLockLookups bounds how many refused versions one purge pass asks the store about
// (their retention and legal hold: two requests each, from the store's purge budget).
// Refusals past it count as locked without a date; a later pass reads more.
const purgeLockLookups = 100

// purgeLock is what a purge needs of the store's object lock guardrails, and the way
// out when the claim stops waiting.
type purgeLock struct {
	bypass       bool
	releaseAfter time.Duration
	store        string
	// release keeps the bucket as with Retain, tagged with TagDeletionBlocked=tag.
	release func(ctx context.Context, tag string) error
}

func (r *Reconciler) purgeLockOf(sb *bkv1.StorageBucket, store *bkv1.ObjectStore, me owner, c s3.Client, bucket string, tags map[string]string) purgeLock {
	rails := store.Spec.Guardrails.ObjectLock
	after := defaults.ReleaseBlockedDeletionAfter
	if rails.ReleaseBlockedDeletionAfter != nil {
		after = max(0, rails.ReleaseBlockedDeletionAfter.Duration)
	}
	return purgeLock{bypass: rails.PurgeMayBypassGovernance, releaseAfter: after, store: store.Name,
		release: func(ctx context.Context, tag string) error {
			tagged := maps.Clone(tags)
			tagged[bkv1.TagDeletionBlocked] = tag
			_, err := r.releaseBucket(ctx, sb, me, c, bucket, tagged)
			return err
		}}
}

// lockTally is what a purge's listing found locked.
type lockTally struct {
	versions int64 // locked versions, of which:
	// under a retention of their own, by mode, with the earliest and latest end;
	governance, compliance int64
	earliest, latest       time.Time
	// under a legal hold;
	held int64
	// locked by the bucket's default retention (byDefault) though they have no retention
	// of their own: Versity, whose default retention counts from when it was set;
	defaulted int64
	byDefault *s3.DefaultRetention
	// not asked about (past purgeLockLookups or the purge budget).
	unread int64
	// last is the last locked version in listing order: the next pass of the listing
	// continues after it, so versions that stay locked are not listed again and again.
	last s3.ObjectID
}

func (t *lockTally) add(o lockTally) {
	if o.versions == 0 {
		return
	}
	if t.retained() == 0 || (o.retained() > 0 && o.earliest.Before(t.earliest)) {
		t.earliest = o.earliest
	}
	if o.latest.After(t.latest) {
		t.latest = o.latest
	}
	t.versions += o.versions
	t.governance += o.governance
	t.compliance += o.compliance
	t.held += o.held
	t.defaulted += o.defaulted
	t.unread += o.unread
	if o.byDefault != nil {
		t.byDefault = o.byDefault
	}
	t.last = o.last
}

func (t lockTally) retained() int64 { return t.governance + t.compliance }

// until is when the last locked version unlocks, when every one of them was read and
// has a retention of its own; zero otherwise.
func (t lockTally) until() time.Time {
	if t.held > 0 || t.defaulted > 0 || t.unread > 0 {
		return time.Time{}
	}
	return t.latest
}

// lockFinder deletes one pass's pages of versions and tells the versions an object lock
// keeps from refusals it does not explain, which fail the purge as before.
type lockFinder struct {
	c       s3.Client
	bucket  string
	bypass  bool
	spend   purgeSpender
	now     time.Time
	lookups int
	// bucketDefault is the bucket's default retention once read this pass.
	bucketDefault     *s3.DefaultRetention
	readBucketDefault bool
	found             lockTally
}

// delete deletes ids and returns how many went; the locked rest is in found.
func (f *lockFinder) delete(ctx context.Context, ids []s3.ObjectID) (int, error) {
	del := f.c.DeleteObjects
	if f.bypass {
		del = f.c.DeleteObjectsBypassingGovernance
	}
	err := del(ctx, f.bucket, ids)
	if err == nil {
		return len(ids), nil
	}
	refused := reconcile.AsStepError(err, fmt.Sprintf("purging objects of bucket %q", f.bucket))
	var failed *s3.DeleteObjectsError
	if !errors.As(err, &failed) {
		return 0, refused
	}
	for _, o := range failed.Failed {
		if o.Kind() != s3.KindAccessDenied {
			return 0, refused
		}
	}
	locked := map[s3.ObjectID]bool{}
	for _, o := range failed.Failed {
		id := s3.ObjectID{Key: o.Key, VersionID: o.VersionID}
		ok, err := f.inspect(ctx, id)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, refused // a refusal no lock explains: the operator may not delete here
		}
		locked[id] = true
	}
	for _, id := range ids { // the last one in listing order, which the store's answer need not keep
		if locked[id] {
			f.found.last = id
		}
	}
	return len(ids) - len(failed.Failed), nil
}

// inspect says whether a version DeleteObjects refused is locked, and adds it to found.
func (f *lockFinder) inspect(ctx context.Context, id s3.ObjectID) (bool, error) {
	t := &f.found
	if f.lookups <= 0 || !f.spend.take(2) {
		t.versions++
		t.unread++
		return true, nil
	}
	f.lookups--
	ret, err := f.c.GetObjectRetention(ctx, f.bucket, id.Key, id.VersionID)
	if err != nil {
		return false, reconcile.AsStepError(err, fmt.Sprintf("reading the retention of a locked object in bucket %q", f.bucket))
	}
	if ret.Mode != "" && ret.Until.After(f.now) && !(ret.Mode == s3.RetentionGovernance && f.bypass) {
		if t.retained() == 0 || ret.Until.Before(t.earliest) {
			t.earliest = ret.Until
		}
		if ret.Until.After(t.latest) {
			t.latest = ret.Until
		}
		t.versions++
		if ret.Mode == s3.RetentionCompliance {
			t.compliance++
		} else {
			t.governance++
		}
		return true, nil
	}
	held, err := f.c.GetObjectLegalHold(ctx, f.bucket, id.Key, id.VersionID)
	if err != nil {
		return false, reconcile.AsStepError(err, fmt.Sprintf("reading the legal hold of a locked object in bucket %q", f.bucket))
	}
	if held {
		t.versions++
		t.held++
		return true, nil
	}
	// No lock of its own: the bucket's default retention may lock it still (Versity
	// locks every version by it, for its period from when it was set).
	if !f.readBucketDefault {
		cfg, err := f.c.GetObjectLockConfiguration(ctx, f.bucket)
		if err != nil {
			return false, reconcile.AsStepError(err, fmt.Sprintf("reading the object lock of bucket %q", f.bucket))
		}
		f.bucketDefault, f.readBucketDefault = cfg.DefaultRetention, true
	}
	if d := f.bucketDefault; d != nil && !(d.Mode == s3.RetentionGovernance && f.bypass) {
		t.versions++
		t.defaulted++
		t.byDefault = d
		return true, nil
	}
	return false, nil
}

// purgeBlocked is a purge whose listing found nothing left but locked versions: the
// claim reports it (status.deletionBlocked, Ready=False DeletionBlocked, a Warning Event
// when it starts, the deletion-blocked metric) and the next pass comes when the first
// version unlocks (at the earliest a sync interval from now, since a store may count
// many versions down one after the other), or when the claim stops waiting; then the
// bucket is kept as with Retain and done is true.
func (r *Reconciler) purgeBlocked(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher, bucket string, lock purgeLock, t lockTally) (done bool, err error) {
	now := r.Clock.Now()
	blocked := sb.Status.DeletionBlocked
	if blocked == nil {
		blocked = &bkv1.DeletionBlocked{Since: metav1.NewTime(now)}
	}
	blocked.LockedVersions = t.versions
	blocked.Until = nil
	if until := t.until(); !until.IsZero() {
		blocked.Until = &metav1.Time{Time: until.Truncate(time.Second)}
	}
	blocked.ReleaseAt = metav1.NewTime(blocked.Since.Add(lock.releaseAfter))
	sb.Status.DeletionBlocked = blocked
	r.noteDeletionBlocked(sb, blocked.Since.Time)

	if !now.Before(blocked.ReleaseAt.Time) {
		tag := fmt.Sprintf("Purge blocked by %d locked object versions %s", t.versions, untilTag(t))
		if err := lock.release(ctx, tag); err != nil {
			return false, err
		}
		r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, bkv1.EventReasonBucketReleased, "Delete",
			"deletionPolicy Purge of bucket %s waited since %s for %d locked object versions; it is kept instead, with them, released and tagged %s for the store's admin (ObjectStore %q's guardrails.objectLock.releaseBlockedDeletionAfter)",
			bucket, blocked.Since.UTC().Format(time.RFC3339), t.versions, bkv1.TagDeletionBlocked, lock.store)
		return true, nil
	}

	msg := fmt.Sprintf("deletionPolicy Purge deleted what it may from bucket %q; %d object versions left are locked (%s)%s; at %s (ObjectStore %q's guardrails.objectLock.releaseBlockedDeletionAfter) the bucket is kept as with Retain, tagged %s, and this StorageBucket goes",
		bucket, t.versions, t.describe(), t.unlocking(lock.bypass), blocked.ReleaseAt.UTC().Format(time.RFC3339), lock.store, bkv1.TagDeletionBlocked)
	if c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionReady); c == nil || c.Reason != bkv1.ReasonDeletionBlocked {
		patcher.AfterWrite(func() {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, bkv1.ReasonDeletionBlocked, "Delete", "%s", msg)
		})
	}
	reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonDeletionBlocked, msg+abandonHint)

	wake := now.Add(r.SyncInterval)
	if t.retained() > 0 && t.earliest.After(wake) {
		wake = t.earliest
	}
	r.purges.pace(sb.UID, minTime(wake, blocked.ReleaseAt.Time))
	return false, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// describe says what locks the versions: "2 under Compliance retention, 1 under a legal
// hold".
func (t lockTally) describe() string {
	var parts []string
	if t.governance > 0 {
		parts = append(parts, fmt.Sprintf("%d under Governance retention", t.governance))
	}
	if t.compliance > 0 {
		parts = append(parts, fmt.Sprintf("%d under Compliance retention", t.compliance))
	}
	if t.held > 0 {
		parts = append(parts, fmt.Sprintf("%d under a legal hold", t.held))
	}
	if t.defaulted > 0 {
		parts = append(parts, fmt.Sprintf("%d under the bucket's default retention (%s), which this store counts from when it was set, not per version", t.defaulted, retentionOf(t.byDefault)))
	}
	if t.unread > 0 {
		parts = append(parts, fmt.Sprintf("%d not looked at yet", t.unread))
	}
	return strings.Join(parts, ", ")
}

// unlocking says when they unlock and what could be done sooner.
func (t lockTally) unlocking(bypass bool) string {
	var b strings.Builder
	if t.retained() > 0 {
		fmt.Fprintf(&b, "; the first retention found ends at %s", t.earliest.UTC().Format(time.RFC3339))
		if until := t.until(); !until.IsZero() {
			fmt.Fprintf(&b, ", the last at %s", until.UTC().Format(time.RFC3339))
		}
	}
	if t.held > 0 {
		b.WriteString("; a legal hold lasts until someone allowed to lifts it")
	}
	if t.defaulted > 0 {
		b.WriteString("; the bucket's default retention ends its period after it was last set")
	}
	governance := t.governance > 0 || t.defaulted > 0 && t.byDefault != nil && t.byDefault.Mode == s3.RetentionGovernance
	if !bypass && governance {
		b.WriteString("; the store's admin may let a Purge bypass Governance retention (guardrails.objectLock.purgeMayBypassGovernance)")
	}
	return b.String()
}

// untilTag is the end of TagDeletionBlocked's value, within S3's tag character set.
func untilTag(t lockTally) string {
	if until := t.until(); !until.IsZero() {
		return "until " + until.UTC().Format(time.RFC3339)
	}
	return "until a legal hold is lifted or a retention the store reports no date for ends"
}

func retentionOf(d *s3.DefaultRetention) string {
	if d == nil {
		return "none"
	}
	return lockStatus(s3.ObjectLockConfig{Enabled: true, DefaultRetention: d}).DefaultRetention.String()
}

// noteDeletionBlocked feeds the deletion-blocked metric; forget takes the series away
// with the StorageBucket.
func (r *Reconciler) noteDeletionBlocked(sb *bkv1.StorageBucket, since time.Time) {
	key := client.ObjectKeyFromObject(sb)
	r.blocked.Store(key, true)
	if r.OnDeletionBlocked != nil {
		r.OnDeletionBlocked(key, &since)
	}
}
