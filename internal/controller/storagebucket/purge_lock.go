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

// A deletion never breaks an object lock. A Purge deletes what it may (versions under
// Governance retention too, where the store's admin allows it with
// guardrails.objectLock.purgeMayBypassGovernance; never Compliance, which no store lets
// anyone bypass); a Delete deletes nothing but an empty bucket. Either way, a bucket with
// nothing left but locked versions (for a Delete, with any) blocks the deletion: the
// claim reports DeletionBlocked with what locks them and until when, and looks again when
// the first of them unlocks. The claim does not wait forever: after the store's
// guardrails.objectLock.releaseBlockedDeletionAfter, counted from when its deletion first
// blocked, the bucket is kept as with Retain, its locked versions on it, tagged
// bucketkeeper.io/deletion-blocked for the store's admin, and the finalizer goes, so a
// namespace being deleted has a defined end. The claim's every bucket meets locks so:
// its home, the copies its moves left behind and the target of a move that did not
// finish (purgeJob). A claim that is not being deleted (the source a finished move
// deletes after spec.move.deleteSourceAfter) waits for the lock as long as it lasts,
// looking again as rarely.

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
	// partial: the look did not reach every version (surveyLocks), so more may be
	// locked, for longer, than the tally says.
	partial bool
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
	t.partial = t.partial || o.partial
	t.last = o.last
}

func (t lockTally) retained() int64 { return t.governance + t.compliance }

// until is when the last locked version unlocks, when every one of them was read and
// has a retention of its own; zero otherwise.
func (t lockTally) until() time.Time {
	if t.held > 0 || t.defaulted > 0 || t.unread > 0 || t.partial {
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
	// ownRetention: a version read had a retention of its own, ended or not.
	ownRetention bool
	found        lockTally
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
		if !o.MayBeLock() {
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
// A refusal it may not ask about (past lookups or the purge budget) counts as locked.
func (f *lockFinder) inspect(ctx context.Context, id s3.ObjectID) (bool, error) {
	if !f.mayAsk() {
		f.found.versions++
		f.found.unread++
		return true, nil
	}
	return f.read(ctx, id)
}

// mayAsk takes a lookup of a version's lock (two requests) when one is left.
func (f *lockFinder) mayAsk() bool {
	if f.lookups <= 0 || !f.spend.take(2) {
		return false
	}
	f.lookups--
	return true
}

// read asks the store what locks a version, and adds it to found if something does.
func (f *lockFinder) read(ctx context.Context, id s3.ObjectID) (bool, error) {
	t := &f.found
	ret, err := f.c.GetObjectRetention(ctx, f.bucket, id.Key, id.VersionID)
	if err != nil {
		return false, reconcile.AsStepError(err, fmt.Sprintf("reading the retention of an object in bucket %q", f.bucket))
	}
	f.ownRetention = f.ownRetention || ret.Mode != ""
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
		return false, reconcile.AsStepError(err, fmt.Sprintf("reading the legal hold of an object in bucket %q", f.bucket))
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

// surveyLocks looks for versions an object lock keeps in a bucket a Delete found not
// empty (a Delete deletes none, so it cannot learn it from a refusal as a purge does): a
// bucket without object lock has none; otherwise the first page of its versions is
// listed and up to purgeLockLookups of them are asked about, from the store's purge
// budget. The tally is partial when versions were left unasked.
//
// A version without a retention or legal hold of its own is locked by the bucket's
// default retention only on a store that gives no version a retention of its own
// (Versity, which locks every version by the default, for its period from when it was
// set): where versions have one (SeaweedFS, Ceph RGW), a version without one was
// written before the default and nothing locks it.
func surveyLocks(ctx context.Context, job purgeJob, now time.Time) (lockTally, error) {
	if !job.spend.take(2) {
		return lockTally{}, nil // asked again once the budget allows; BucketNotEmpty meanwhile
	}
	cfg, err := job.c.GetObjectLockConfiguration(ctx, job.bucket)
	if s3.KindOf(err) == s3.KindNotImplemented {
		return lockTally{}, nil
	}
	if err != nil {
		return lockTally{}, reconcile.AsStepError(err, fmt.Sprintf("reading the object lock of bucket %q", job.bucket))
	}
	if !cfg.Enabled {
		return lockTally{}, nil
	}
	page, err := job.c.ListObjectVersions(ctx, job.bucket, nil)
	if err != nil {
		return lockTally{}, reconcile.AsStepError(err, fmt.Sprintf("listing objects of bucket %q to find what locks them", job.bucket))
	}
	// The default is not applied while reading (bucketDefault nil): see above.
	f := &lockFinder{c: job.c, bucket: job.bucket, spend: job.spend, now: now, lookups: purgeLockLookups, readBucketDefault: true}
	f.found.partial = page.Next != nil
	var bare int64
	for _, v := range page.Versions {
		if v.IsDeleteMarker {
			continue // nothing locks a delete marker
		}
		if !f.mayAsk() {
			f.found.partial = true
			break
		}
		locked, err := f.read(ctx, s3.ObjectID{Key: v.Key, VersionID: v.VersionID})
		if err != nil {
			return lockTally{}, err
		}
		if !locked {
			bare++
		}
	}
	if d := cfg.DefaultRetention; d != nil && bare > 0 && !f.ownRetention {
		f.found.versions += bare
		f.found.defaulted += bare
		f.found.byDefault = d
	}
	return f.found, nil
}

// deletionBlocked is a deletion of a claim that found nothing it may delete but locked
// versions on job's bucket: the claim reports it (status.deletionBlocked, Ready=False
// DeletionBlocked, a Warning Event when it starts, the deletion-blocked metric) and the
// next pass comes when the first version unlocks (see lockedWake), or when the claim
// stops waiting; then the bucket is kept as with Retain and done is true. Its since is
// when the claim's deletion first blocked, on whichever of its buckets: the claim's
// bound counts from there, once for all of them.
func (r *Reconciler) deletionBlocked(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher, policy bkv1.DeletionPolicy, job purgeJob, t lockTally) (done bool, err error) {
	now := r.Clock.Now()
	lock := job.lock
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
		tag := fmt.Sprintf("%s blocked by %d locked object versions %s", policy, t.versions, untilTag(t))
		if err := lock.release(ctx, tag); err != nil {
			return false, err
		}
		r.purges.forget(job.key)
		r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, bkv1.EventReasonBucketReleased, "Delete",
			"deletionPolicy %s of bucket %s%s waited since %s for %d locked object versions; it is kept instead, with them, released and tagged %s for the store's admin (ObjectStore %q's guardrails.objectLock.releaseBlockedDeletionAfter)",
			policy, job.bucket, job.where, blocked.Since.UTC().Format(time.RFC3339), t.versions, bkv1.TagDeletionBlocked, lock.store)
		return true, nil
	}

	head, msg := blockedMessage(policy, job, t, blocked.ReleaseAt.Time)
	if c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionReady); c == nil || c.Reason != bkv1.ReasonDeletionBlocked || !strings.HasPrefix(c.Message, head) {
		// Announced when it starts, and when another of the claim's buckets blocks it.
		patcher.AfterWrite(func() {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, bkv1.ReasonDeletionBlocked, "Delete", "%s", msg)
		})
	}
	reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonDeletionBlocked, msg+abandonHint)
	r.purges.pace(job.key, minTime(r.lockedWake(t, now), blocked.ReleaseAt.Time))
	return false, nil
}

// blockedMessage says what a blocked deletion found, what the claim waits for and what
// the tenant can do meanwhile (the Orphan annotation follows it, abandonHint). head is
// its start, up to the bucket it names.
func blockedMessage(policy bkv1.DeletionPolicy, job purgeJob, t lockTally, releaseAt time.Time) (head, msg string) {
	release := fmt.Sprintf("at %s (ObjectStore %q's guardrails.objectLock.releaseBlockedDeletionAfter) the bucket is kept as with Retain, tagged %s, and this StorageBucket goes",
		releaseAt.UTC().Format(time.RFC3339), job.lock.store, bkv1.TagDeletionBlocked)
	if policy == bkv1.DeletionPolicyDelete {
		count := fmt.Sprint(t.versions)
		if t.partial {
			count = "at least " + count
		}
		head = fmt.Sprintf("deletionPolicy Delete deletes only an empty bucket, and bucket %q%s holds", job.bucket, job.where)
		return head, fmt.Sprintf("%s %s object versions an object lock keeps (%s)%s, which no key may delete; %s; to delete now what no lock keeps, set deletionPolicy Purge",
			head, count, t.describe(), t.unlocking(job.lock.bypass), release)
	}
	why := job.why
	if why == "" {
		why = "deletionPolicy Purge"
	}
	head = fmt.Sprintf("%s deleted what it may from bucket %q%s;", why, job.bucket, job.where)
	return head, fmt.Sprintf("%s %d object versions left are locked (%s)%s; %s", head, t.versions, t.describe(), t.unlocking(job.lock.bypass), release)
}

// lockedWake is when a deletion blocked by locked versions looks again: when the first
// of them unlocks, and at the earliest a sync interval (at least defaults.LockedRecheck) from
// now, since a store may count many versions down one after the other and a lock
// without a date (a legal hold, Versity's default retention) is looked at again at
// that pace.
func (r *Reconciler) lockedWake(t lockTally, now time.Time) time.Time {
	wake := now.Add(max(r.SyncInterval, defaults.LockedRecheck))
	if t.retained() > 0 && t.earliest.After(wake) {
		wake = t.earliest
	}
	return wake
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
