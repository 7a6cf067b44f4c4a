package storagebucket

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/memo"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// purgeReportInterval bounds how often a purge's progress is written to status and
// announced as an Event: a large bucket takes many passes (about one a second), and a
// status write and an Event each would flood the API server and `kubectl describe`.
const purgeReportInterval = 10 * time.Second

// purgeProgress is what one purge has done so far. S3 offers no cheap count of what a
// bucket holds, so what is left is told as "more pages remain" or "none listed".
type purgeProgress struct {
	deleted, aborted, passes int
	lastReport               time.Time
	// paced: the next pass waits for the store's purge budget (or, blocked by locked
	// versions, for the first of them to unlock) until then.
	paced time.Time
	// policyLifted: the operator's policy is off the bucket (liftPolicyBeforePurge).
	policyLifted bool
	// sweep is the listing under way, which may take several passes.
	sweep purgeSweep
}

// purgeSweep is one listing of the whole bucket: what it deleted and found locked so
// far, and where its next pass lists from (after the last locked version: nil while
// none, as deleted versions are not listed again).
type purgeSweep struct {
	deleted int
	locked  lockTally
	resume  *s3.PageToken
}

func (p purgeProgress) totals() string {
	return fmt.Sprintf("%d object versions deleted and %d incomplete uploads aborted so far, in %d passes", p.deleted, p.aborted, p.passes)
}

func (p purgeProgress) left(more bool) string {
	if more {
		return "objects left: more than one pass lists, purging continues"
	}
	return "objects left: none in the last listing; the bucket is deleted once a listing finds it empty"
}

// purgeMemo keeps each purge's progress by UID in memory. After a restart the counts
// start again from zero, which the passes themselves do not need: each lists afresh.
type purgeMemo struct {
	records memo.Map[types.UID, purgeProgress]
}

// pass adds one pass's work and returns the totals and the sweep with it; a sweep the
// pass ended (its listing's last page) is returned and the next pass starts a new one.
func (m *purgeMemo) pass(uid types.UID, deleted, aborted int, locked lockTally, ended bool) (purgeProgress, purgeSweep) {
	var sweep purgeSweep
	p := m.records.Update(uid, func(p purgeProgress, _ bool) (purgeProgress, bool) {
		p.deleted += deleted
		p.aborted += aborted
		p.passes++
		p.sweep.deleted += deleted
		p.sweep.locked.add(locked)
		if p.sweep.locked.versions > 0 {
			last := p.sweep.locked.last
			p.sweep.resume = &s3.PageToken{KeyMarker: last.Key, VersionIDMarker: last.VersionID}
		}
		sweep = p.sweep
		if ended {
			p.sweep = purgeSweep{}
		}
		return p, true
	})
	return p, sweep
}

// resumeAt is where the purge's next pass lists from (nil: the first page).
func (m *purgeMemo) resumeAt(uid types.UID) *s3.PageToken {
	p, _ := m.records.Get(uid)
	return p.sweep.resume
}

// reportDue says whether progress may be reported now: on the first pass, then at most
// once per purgeReportInterval. It records the report when it says yes.
func (m *purgeMemo) reportDue(uid types.UID, now time.Time) bool {
	due := false
	m.records.Update(uid, func(p purgeProgress, ok bool) (purgeProgress, bool) {
		if ok && (p.lastReport.IsZero() || now.Sub(p.lastReport) >= purgeReportInterval) {
			p.lastReport, due = now, true
		}
		return p, ok
	})
	return due
}

// pace records until when the purge's next pass waits for its store's purge budget
// (or, blocked by locked versions, for the first of them to unlock: a Delete's too,
// which lists and deletes nothing and so has no record before).
func (m *purgeMemo) pace(uid types.UID, until time.Time) {
	m.records.Update(uid, func(p purgeProgress, _ bool) (purgeProgress, bool) {
		p.paced = until
		return p, true
	})
}

// nextPassIn is how long the purge's next pass waits for its store's purge budget.
func (m *purgeMemo) nextPassIn(uid types.UID, now time.Time) time.Duration {
	p, _ := m.records.Get(uid)
	return max(0, p.paced.Sub(now))
}

// liftPolicy records that the purge took the operator's policy off the bucket.
func (m *purgeMemo) liftPolicy(uid types.UID) {
	m.records.Update(uid, func(p purgeProgress, _ bool) (purgeProgress, bool) {
		p.policyLifted = true
		return p, true
	})
}

// policyLifted says whether the purge took the operator's policy off the bucket.
func (m *purgeMemo) policyLifted(uid types.UID) bool {
	p, _ := m.records.Get(uid)
	return p.policyLifted
}

func (m *purgeMemo) forget(uid types.UID) { m.records.Delete(uid) }

// purgePagesPerPass bounds the work of one Purge reconcile (1000 versions a page), so a
// huge bucket reports progress and lets other objects through the queue in between.
const purgePagesPerPass = 5

// purgeJob is one bucket a claim's data is deleted from: its home bucket
// (deletionPolicy Purge), a copy a finished move left on an old home, a finished move's
// source (spec.move.deleteSourceAfter), the target of a move that did not finish. Every
// one is emptied by purgePass, so every one meets locked versions the same way
// (purge_lock.go) and spends the same purge budget of its store.
type purgeJob struct {
	// key is what r.purges remembers this purge by: the claim's UID for its home
	// bucket; for another bucket of the claim's, that and what the bucket is.
	key    types.UID
	c      s3.Client
	bucket string
	// where says, after the bucket's name, which bucket it is when it is not the
	// claim's home: ` on ObjectStore "old", a copy a move left behind`.
	where string
	// why is what empties it, for people ("": deletionPolicy Purge).
	why   string
	spend purgeSpender
	lock  purgeLock
}

// purgeOutcome is what one pass of a purge came to.
type purgeOutcome int

const (
	// purgeGoesOn: more to delete, or a listing that deleted something must be
	// followed by one that finds the bucket empty.
	purgeGoesOn purgeOutcome = iota
	// purgeGone: the bucket is deleted, or no longer there.
	purgeGone
	// purgeLocked: a whole listing found nothing left but versions an object lock keeps.
	purgeLocked
)

// purgeResult is one pass's outcome, with what the purge did so far and, when it is
// purgeLocked, what keeps the versions left.
type purgeResult struct {
	outcome  purgeOutcome
	progress purgeProgress
	locked   lockTally
	// absent: the bucket was not there when the pass came to delete it.
	absent bool
	// more: the pass left pages or uploads for the next.
	more bool
}

// purgePass aborts incomplete multipart uploads and deletes every object version and
// delete marker, a few pages at a time, then the bucket. Each pass starts listing
// afresh (after the last version an object lock keeps, if any: purge_lock.go), so an
// interrupted purge simply resumes. It reports nothing: what a pass came to is told by
// its caller, which knows whether a claim's deletion or its move is waiting on it.
func (r *Reconciler) purgePass(ctx context.Context, job purgeJob) (purgeResult, error) {
	c, bucket := job.c, job.bucket
	// The least a pass does is paid for at once (takeLeast): a pass that could list
	// the uploads but not a page of versions would do the same next time, and never
	// list one.
	spend := job.spend.forPass()
	paid, debt := spend.takeLeast(purgeLeastRequests)
	aborted, uploadsLeft, versionsLeft := 0, !paid, !paid
	if paid {
		var err error
		if aborted, uploadsLeft, err = abortUploads(ctx, c, bucket, spend); err != nil {
			return purgeResult{}, err
		}
	}
	deleted, ended := 0, false
	locks := &lockFinder{c: c, bucket: bucket, bypass: job.lock.bypass, spend: spend, now: r.Clock.Now(), lookups: purgeLockLookups}
	page := r.purges.resumeAt(job.key)
	for range purgePagesPerPass {
		// A listing and the deletion of its page: two requests.
		if !paid || !spend.take(2) {
			versionsLeft = true
			break
		}
		res, err := c.ListObjectVersions(ctx, bucket, page)
		if err != nil {
			return purgeResult{}, reconcile.AsStepError(err, fmt.Sprintf("listing objects of bucket %q to purge it", bucket))
		}
		ids := make([]s3.ObjectID, 0, len(res.Versions))
		for _, v := range res.Versions {
			ids = append(ids, s3.ObjectID{Key: v.Key, VersionID: v.VersionID})
		}
		if len(ids) > 0 {
			n, err := locks.delete(ctx, ids)
			if err != nil {
				return purgeResult{}, err
			}
			deleted += n
		}
		if res.Next == nil {
			ended = true
			break
		}
		page, versionsLeft = res.Next, true
	}
	progress, sweep := r.purges.pass(job.key, deleted, aborted, locks.found, ended)
	r.purges.pace(job.key, spend.now().Add(spend.wait()+debt))
	result := purgeResult{progress: progress, more: versionsLeft || uploadsLeft}
	if ended && sweep.locked.versions > 0 {
		result.outcome, result.locked = purgeLocked, sweep.locked
		return result, nil
	}
	if ended && sweep.deleted == 0 && aborted == 0 && !uploadsLeft {
		// The listings found nothing: the bucket should be empty now.
		err := c.DeleteBucket(ctx, bucket)
		switch s3.KindOf(err) {
		case s3.KindNotFound:
			result.outcome, result.absent = purgeGone, true
		case s3.KindNotEmpty:
			// Written to since it was listed (or a store with hidden leftovers): the
			// next pass lists again. Not an error a person has to act on.
		default:
			if err != nil {
				return purgeResult{}, reconcile.AsStepError(err, fmt.Sprintf("deleting purged bucket %q", bucket))
			}
			result.outcome = purgeGone
		}
	}
	return result, nil
}

// purgeBucket runs a pass of the purge of a bucket of a claim being deleted. Progress
// goes to status and Events at most every purgeReportInterval (see purgeProgress), not
// on every pass; a listing that finds nothing left but locked versions reports the
// deletion blocked, and once the claim stops waiting keeps the bucket instead
// (deletionBlocked): done is true then too.
func (r *Reconciler) purgeBucket(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher, job purgeJob) (bool, error) {
	res, err := r.purgePass(ctx, job)
	if err != nil {
		return false, err
	}
	switch res.outcome {
	case purgeGone:
		r.purges.forget(job.key)
		if res.absent {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.EventReasonBucketAbsent, "Delete", "bucket %s%s is no longer on the store: nothing left to purge", job.bucket, job.where)
		} else {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.EventReasonBucketDeleted, "Delete", "purged and deleted bucket %s%s (%s)", job.bucket, job.where, res.progress.totals())
		}
		return true, nil
	case purgeLocked:
		return r.deletionBlocked(ctx, sb, patcher, bkv1.DeletionPolicyPurge, job, res.locked)
	}
	if r.purges.reportDue(job.key, r.Clock.Now()) {
		msg := fmt.Sprintf("purging bucket %q%s: %s; %s", job.bucket, job.where, res.progress.totals(), res.progress.left(res.more))
		reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonPurging, msg)
		patcher.AfterWrite(func() { r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonPurging, "Delete", "%s", msg) })
	}
	return false, nil
}

// abortUploads aborts what the purge budget allows of one page of the bucket's
// incomplete multipart uploads: they hold data (and, on some stores, the bucket)
// although no listing of objects shows them. more says uploads remain. A store that
// cannot list uploads has none to abort.
func abortUploads(ctx context.Context, c s3.Client, bucket string, spend purgeSpender) (aborted int, more bool, err error) {
	if !spend.take(1) {
		return 0, true, nil
	}
	page, err := c.ListMultipartUploads(ctx, bucket, nil)
	if s3.KindOf(err) == s3.KindNotImplemented {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, reconcile.AsStepError(err, fmt.Sprintf("listing incomplete uploads of bucket %q to purge it", bucket))
	}
	for _, u := range page.Uploads {
		if !spend.take(1) {
			return aborted, true, nil
		}
		if err := c.AbortMultipartUpload(ctx, bucket, u.Key, u.UploadID); err != nil {
			return aborted, false, reconcile.AsStepError(err, fmt.Sprintf("aborting an incomplete upload in bucket %q", bucket))
		}
		aborted++
	}
	return aborted, page.Next != nil, nil
}

// purgeSpender takes a purge's requests from its store's purge budget (PurgeBudget):
// a pass sends what the budget has now and stops there; the next pass comes when it
// has some again. A nil budget takes everything.
type purgeSpender struct {
	budget *rate.Limiter
	now    func() time.Time
	// prepaid is what this pass has paid for already (takeLeast); see forPass.
	prepaid *int
}

// forPass is the spender of one pass, with nothing prepaid yet.
func (s purgeSpender) forPass() purgeSpender {
	s.prepaid = new(int)
	return s
}

func (s purgeSpender) take(n int) bool {
	if s.prepaid != nil && *s.prepaid >= n {
		*s.prepaid -= n
		return true
	}
	return s.budget == nil || s.budget.AllowN(s.now(), n)
}

// takeLeast pays for a pass's least work, n requests, which take then spends first,
// even from a budget whose burst is smaller and so never holds n at once: it takes the
// whole burst then and owes the rest, debt being how long the budget takes to earn it,
// which the next pass waits on top. Either way the purges spend no more than the budget
// over time.
func (s purgeSpender) takeLeast(n int) (ok bool, debt time.Duration) {
	if s.budget != nil {
		burst := s.budget.Burst()
		if n <= burst {
			if !s.budget.AllowN(s.now(), n) {
				return false, 0
			}
		} else {
			limit := float64(s.budget.Limit())
			if limit <= 0 || !s.budget.AllowN(s.now(), burst) {
				return false, 0
			}
			debt = time.Duration(float64(n-burst) / limit * float64(time.Second))
		}
	}
	if s.prepaid != nil {
		*s.prepaid = n
	}
	return true, debt
}

// wait is how long until the budget has a pass's worth of requests again (zero: now).
func (s purgeSpender) wait() time.Duration {
	if s.budget == nil {
		return 0
	}
	now := s.now()
	r := s.budget.ReserveN(now, min(purgePassRequests, s.budget.Burst()))
	defer r.CancelAt(now)
	if !r.OK() {
		return 0
	}
	return r.DelayFrom(now)
}

// purgePassRequests is what a full pass sends besides its uploads' aborts: the listing
// of uploads and purgePagesPerPass listings of versions with a deletion each.
const purgePassRequests = 1 + 2*purgePagesPerPass

// purgeLeastRequests is the least a pass sends: the listing of uploads, and one listing
// of versions with its deletion.
const purgeLeastRequests = 3
