package storagebucket

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// movesPass is the outcome of one look at the movers' objects, for logs and tests.
type movesPass struct {
	// removed moves had everything of theirs removed; unfinished ones are still being
	// seen to (movers stopping, a target being emptied or settling), and the next pass
	// comes soon; failed ones met an error, and are tried again later.
	removed, unfinished, failed int
}

// sweepMoves looks at every move the movers' objects name and removes what belongs to
// a move that no longer exists.
func (s *MoveSweeper) sweepMoves(ctx context.Context) (movesPass, error) {
	var out movesPass
	if s.Direct == nil || s.Namespace == "" {
		return out, nil
	}
	ctx, cancel := context.WithTimeout(ctx, defaults.MoveSweepPassTimeout)
	defer cancel()
	moves, err := mover.ListMoves(ctx, s.Direct, s.Namespace)
	if err != nil || len(moves) == 0 {
		s.keepStale(nil)
		return out, err
	}
	// Read after the movers' objects: a claim exists before anything of its moves, so
	// one missing now is gone, and its UID never comes back.
	claims, err := s.claims(ctx, s.APIReader)
	if err != nil {
		return out, err
	}
	now := s.Clock.Now()
	stale := map[string]bool{}
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range moves {
			if !yield(id) {
				return
			}
		}
	}) {
		hex, ours := mover.ClaimOfMove(id)
		if !ours {
			continue // not named as the controller names moves: nobody's to judge
		}
		l := moves[id]
		sb := claims.byHex[hex]
		var current *bkv1.MoveStatus
		if sb != nil {
			current = sb.Status.Move
		}
		var done bool
		switch {
		case sb == nil:
			done, err = s.sweepGoneMove(ctx, id, hex, l)
		case current != nil && current.ID == id && !current.Terminal():
			continue // the claim's move, going on
		default:
			stale[id] = true
			if since := s.staleSince(id, now); now.Sub(since) < defaults.MoveSweepStaleGrace {
				continue // looked at again by a later sweep
			}
			done, err = s.sweepStaleMove(ctx, id, sb, l)
		}
		switch {
		case err != nil:
			// One move that cannot be seen to never keeps the others waiting.
			log.FromContext(ctx).Info("move sweep: cannot remove what a move left yet; retrying later", "move", id, "error", err.Error())
			out.failed++
		case done:
			out.removed++
			delete(stale, id)
		default:
			out.unfinished++
		}
	}
	s.keepStale(stale)
	s.keepStopped(moves)
	return out, nil
}

// keepStopped forgets when the movers of moves no longer listed stopped.
func (s *MoveSweeper) keepStopped(moves map[string]*mover.Leftovers) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.stopped {
		if moves[id] == nil {
			delete(s.stopped, id)
		}
	}
}

// sweepGoneMove removes what a move whose claim is gone left: its movers are stopped,
// the buckets its record names seen to, then its objects deleted. done says nothing of
// it is left.
func (s *MoveSweeper) sweepGoneMove(ctx context.Context, id, hex string, l *mover.Leftovers) (bool, error) {
	if stopped, err := s.stopMovers(ctx, id, l); err != nil || !stopped {
		return false, err
	}
	// A write a stopped mover sent may still be carried out (and SeaweedFS makes the
	// bucket again for it): the target is touched once that is past.
	if since := s.stoppedSince(id, s.Clock.Now()); s.Clock.Now().Sub(since) < defaults.MoveTargetSettle {
		return false, nil
	}
	if l.Record != nil {
		if done, err := s.sweepMoveBuckets(ctx, id, hex, l.Record); err != nil || !done {
			return false, err
		}
	}
	if err := mover.DeleteMove(ctx, s.Direct, s.Namespace, l); err != nil {
		return false, err
	}
	log.FromContext(ctx).Info("removed what a move whose StorageBucket is gone left behind", "move", id,
		"jobs", len(l.Jobs), "configMaps", len(l.ConfigMaps), "secrets", len(l.Secrets))
	return true, nil // its Jobs, being deleted, go with their pods
}

// sweepStaleMove removes the movers' objects of an earlier move of a live claim. Its
// buckets are the claim's, which its controller sees to.
func (s *MoveSweeper) sweepStaleMove(ctx context.Context, id string, sb *bkv1.StorageBucket, l *mover.Leftovers) (bool, error) {
	if stopped, err := s.stopMovers(ctx, id, l); err != nil || !stopped {
		return false, err
	}
	if err := mover.DeleteMove(ctx, s.Direct, s.Namespace, l); err != nil {
		return false, err
	}
	current := "none"
	if sb.Status.Move != nil {
		current = fmt.Sprintf("%s (%s)", sb.Status.Move.ID, sb.Status.Move.Phase)
	}
	log.FromContext(ctx).Info("removed what an earlier move of a StorageBucket left behind", "move", id,
		"storageBucket", sb.Namespace+"/"+sb.Name, "currentMove", current)
	return true, nil
}

// stopMovers stops the move's movers and says whether they are stopped: its Jobs are
// deleted with their pods first (foreground), and count as stopped once being deleted
// for MoveSweepJobStopGrace with no pod left in their status (the cluster's garbage
// collector removes them); the runner stops the movers it runs in this process.
func (s *MoveSweeper) stopMovers(ctx context.Context, id string, l *mover.Leftovers) (bool, error) {
	stopped := true
	now := s.Clock.Now()
	for i := range l.Jobs {
		job := &l.Jobs[i]
		if job.DeletionTimestamp.IsZero() {
			if err := s.Direct.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
				return false, fmt.Errorf("deleting mover Job %s: %w", job.Name, err)
			}
			stopped = false
			continue
		}
		if job.Status.Active > 0 || ptr.Deref(job.Status.Terminating, 0) > 0 || now.Sub(job.DeletionTimestamp.Time) < defaults.MoveSweepJobStopGrace {
			stopped = false
		}
	}
	if s.Runner != nil {
		// The Jobs runner answers ErrStopping while its Jobs are there: they were
		// judged above.
		if err := s.Runner.Cancel(ctx, id); err != nil && !errors.Is(err, mover.ErrStopping) {
			return false, err
		}
	}
	return stopped, nil
}

// sweepMoveBuckets sees to the buckets a gone claim's move named (its record): the
// target is emptied and deleted, unless the controller was told of a verified final
// pass (the record says so: the move may have switched to it, and applications written
// there: it is the claim's home then, left as a gone claim's home is); the source,
// frozen if the move got to its cutover, is thawed and released. Only buckets tagged for this cluster and for the gone claim are
// touched, on any ObjectStore at the recorded endpoint. done says both are seen to.
func (s *MoveSweeper) sweepMoveBuckets(ctx context.Context, id, hex string, rec *mover.Record) (bool, error) {
	list := &bkv1.ObjectStoreList{}
	if err := s.Reconciler.List(ctx, list); err != nil {
		return false, fmt.Errorf("listing ObjectStores: %w", err)
	}
	done := true
	if !rec.Verified {
		byAccount, _ := s.perAccount(ctx, storesAt(list.Items, rec.Target.Endpoint))
		for _, store := range byAccount {
			gone, err := s.removeTarget(ctx, store, rec.Target.Bucket, hex, id)
			if err != nil {
				return false, err
			}
			done = done && gone
		}
	}
	byAccount, _ := s.perAccount(ctx, storesAt(list.Items, rec.Source.Endpoint))
	for _, store := range byAccount {
		if err := s.releaseSource(ctx, store, rec.Source.Bucket, hex); err != nil {
			return false, err
		}
	}
	return done, nil
}

// removeTarget empties and deletes a gone claim's move target on store (removeBucketOf:
// every version, a page at a time, and done once it stays gone). A version object lock
// keeps is never deleted: the bucket is kept with what is locked, released and tagged
// deletion-blocked for the store's admin, and reported. A bucket tagged moved-to is a
// copy an earlier move left there, which this move had not taken back yet: released as
// such copies are.
func (s *MoveSweeper) removeTarget(ctx context.Context, store *bkv1.ObjectStore, bucket, hex, id string) (bool, error) {
	c, err := s.client(ctx, store)
	if err != nil {
		return false, err
	}
	key := id + "/sweep/" + store.Name
	tags, err := c.GetBucketTagging(ctx, bucket)
	switch {
	case s3.KindOf(err) == s3.KindNotFound:
		// Gone: done once it stays gone (a write a stopped mover sent may still land).
		r := s.Reconciler
		if at, ok := r.moveTargetsRemoved.Load(key); ok && r.Clock.Now().Before(at.(time.Time).Add(defaults.MoveTargetSettle)) {
			return false, nil
		}
		r.moveTargetsRemoved.Delete(key)
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading the tags of bucket %q on ObjectStore %q: %w", bucket, store.Name, err)
	}
	uid, ok := s.sweptClaim(tags)
	if !ok || strings.ReplaceAll(string(uid), "-", "") != hex {
		return true, nil // not the gone claim's: left alone
	}
	me := s.goneOwner(tags)
	if tags[bkv1.TagMovedTo] != "" {
		return true, s.release(ctx, store, c, bucket, me, tags, "a copy a move left behind")
	}
	done, err := s.Reconciler.removeBucketOf(ctx, stub(me), store, c, bucket, key)
	if err != nil && lockRefused(err) {
		if cfg, lerr := c.GetObjectLockConfiguration(ctx, bucket); lerr == nil && cfg.Enabled {
			return s.keepLocked(ctx, store, c, bucket, me)
		}
	}
	if done {
		s.event(ctx, store, corev1.EventTypeNormal, bkv1.EventReasonBucketDeleted, "deleted bucket %s, the target of a move whose StorageBucket %s is gone", bucket, me.claim)
	}
	return done, err
}

// lockRefused says whether an emptying stopped on versions an object lock keeps: the
// purge's own verdict (DeletionBlocked), or a store refusing every key it was asked to
// delete as it refuses versions under an object lock (s3.ObjectError.MayBeLock).
func lockRefused(err error) bool {
	var step *reconcile.StepError
	if errors.As(err, &step) && step.Reason == bkv1.ReasonDeletionBlocked {
		return true
	}
	var failed *s3.DeleteObjectsError
	if !errors.As(err, &failed) || len(failed.Failed) == 0 {
		return false
	}
	for _, o := range failed.Failed {
		if !o.MayBeLock() {
			return false
		}
	}
	return true
}

// keepLocked keeps a target whose locked versions cannot be deleted: released, as a
// Purge keeps a bucket it may not finish, and tagged deletion-blocked.
func (s *MoveSweeper) keepLocked(ctx context.Context, store *bkv1.ObjectStore, c s3.Client, bucket string, me owner) (bool, error) {
	tags, err := c.GetBucketTagging(ctx, bucket)
	if err != nil {
		return false, fmt.Errorf("reading the tags of bucket %q on ObjectStore %q: %w", bucket, store.Name, err)
	}
	tags[bkv1.TagDeletionBlocked] = "move target: object lock"
	if err := releaseGone(ctx, c, bucket, me, tags); err != nil {
		return false, err
	}
	s.event(ctx, store, corev1.EventTypeWarning, bkv1.ReasonDeletionBlocked,
		"kept bucket %s, the target of a move whose StorageBucket %s is gone: object lock keeps versions in it; released and tagged %s", bucket, me.claim, bkv1.TagDeletionBlocked)
	return true, nil
}

// releaseSource thaws (when frozen) and releases a gone claim's move source on store; a
// source the move never froze is the gone claim's home, left as it is.
func (s *MoveSweeper) releaseSource(ctx context.Context, store *bkv1.ObjectStore, bucket, hex string) error {
	c, err := s.client(ctx, store)
	if err != nil {
		return err
	}
	tags, err := c.GetBucketTagging(ctx, bucket)
	if s3.KindOf(err) == s3.KindNotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the tags of bucket %q on ObjectStore %q: %w", bucket, store.Name, err)
	}
	uid, ok := s.sweptClaim(tags)
	if !ok || strings.ReplaceAll(string(uid), "-", "") != hex {
		return nil
	}
	_, err = s.judgeGone(ctx, store, c, bucket, tags)
	return err
}

// release releases a gone claim's bucket and reports it.
func (s *MoveSweeper) release(ctx context.Context, store *bkv1.ObjectStore, c s3.Client, bucket string, me owner, tags map[string]string, what string) error {
	if err := releaseGone(ctx, c, bucket, me, tags); err != nil {
		return err
	}
	s.event(ctx, store, corev1.EventTypeNormal, bkv1.EventReasonBucketReleased, "released bucket %s, %s, of StorageBucket %s, which is gone", bucket, what, me.claim)
	return nil
}

// event logs and records an Event on the store: the claim it concerns is gone.
func (s *MoveSweeper) event(ctx context.Context, store *bkv1.ObjectStore, kind, reason, format string, args ...any) {
	log.FromContext(ctx).Info("move sweep: "+fmt.Sprintf(format, args...), "store", store.Name, "reason", reason)
	if s.Recorder != nil {
		s.Recorder.Eventf(store, nil, kind, reason, "SweepMoves", format, args...)
	}
}

// stoppedSince is when the movers of a gone claim's move were first seen stopped.
func (s *MoveSweeper) stoppedSince(id string, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped == nil {
		s.stopped = map[string]time.Time{}
	}
	if at, ok := s.stopped[id]; ok {
		return at
	}
	s.stopped[id] = now
	return now
}

// staleSince is when a live claim's move was first seen stale.
func (s *MoveSweeper) staleSince(id string, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stale == nil {
		s.stale = map[string]time.Time{}
	}
	if at, ok := s.stale[id]; ok {
		return at
	}
	s.stale[id] = now
	return now
}

// keepStale forgets the stale moves not in keep (gone, or current again).
func (s *MoveSweeper) keepStale(keep map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.stale {
		if !keep[id] {
			delete(s.stale, id)
		}
	}
}
