package storagebucket

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// accountSweep is where the sweep of one account's buckets (stores sharing an endpoint
// and a key see the same buckets, and are swept once) stands.
type accountSweep struct {
	// after is the last bucket judged by the sweep under way, in name order: the
	// next pass goes on after it.
	after string
	due   time.Time
	// seen is what earlier passes found each bucket to be.
	seen map[string]bucketSeen
}

// bucketSeen is what the sweep found a bucket to be: a live claim's (uid), whose tags
// are not read again while that claim lives, or no leftover (uid empty: released,
// another cluster's, not the operator's, or the home a gone claim abandoned), not read
// again before until unless a claim names the bucket meanwhile.
type bucketSeen struct {
	uid   types.UID
	until time.Time
}

// bucketsPass is the outcome of one pass over an account, for logs and tests.
type bucketsPass struct {
	// judged buckets had their tags read; released of them were released (thawed
	// first when frozen); done: the sweep reached the last bucket.
	judged, released int
	done             bool
}

// sweepBuckets runs a pass on every account that is due and says how long until the
// next one is.
func (s *MoveSweeper) sweepBuckets(ctx context.Context) (time.Duration, error) {
	next := s.interval()
	list := &bkv1.ObjectStoreList{}
	if err := s.Reconciler.List(ctx, list); err != nil {
		return next, err
	}
	slices.SortFunc(list.Items, func(a, b bkv1.ObjectStore) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	var ready []*bkv1.ObjectStore
	all := map[string]bool{}
	for i := range list.Items {
		store := &list.Items[i]
		all[store.Name] = true
		if !store.DeletionTimestamp.IsZero() || !reconcile.ConditionIsTrue(store.Status.Conditions, bkv1.ConditionReady) {
			continue // its health check says why; nothing is listed there now
		}
		if s.Leases != nil {
			if mine, err := s.Leases.HeldHere(ctx, store.Name); err != nil || !mine {
				continue
			}
		}
		ready = append(ready, store)
	}
	s.forgetClientsExcept(all)
	byAccount, accounts := s.perAccount(ctx, ready)
	swept := map[string]bool{}
	for _, account := range accounts {
		store := byAccount[account]
		swept[account] = true
		state := s.accountSweep(account)
		if wait := state.due.Sub(s.Clock.Now()); wait > 0 {
			next = min(next, wait)
			continue
		}
		c, err := s.client(ctx, store)
		if err != nil {
			log.FromContext(ctx).Info("move sweep: no client for the store; retrying later", "store", store.Name, "error", err.Error())
			state.due = s.Clock.Now().Add(min(s.interval(), time.Minute))
			next = min(next, time.Minute)
			continue
		}
		pass, err := s.bucketPass(ctx, store, c, state)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				log.FromContext(ctx).Info("move sweep of a store's buckets failed; retrying later", "store", store.Name, "error", err.Error())
			}
			state.due = s.Clock.Now().Add(min(s.interval(), time.Minute))
		case pass.done:
			state.due = s.Clock.Now().Add(s.interval())
		default:
			state.due = s.Clock.Now().Add(defaults.AccessCollectContinue)
		}
		if pass.released > 0 {
			log.FromContext(ctx).Info("move sweep pass", "store", store.Name, "judged", pass.judged, "released", pass.released, "sweepDone", pass.done)
		}
		next = min(next, max(state.due.Sub(s.Clock.Now()), 0))
	}
	s.forgetAccountsExcept(swept)
	return next, nil
}

// bucketPass judges the account's buckets from where its sweep stands on, within the
// pass's bounds.
func (s *MoveSweeper) bucketPass(ctx context.Context, store *bkv1.ObjectStore, c s3.Client, state *accountSweep) (bucketsPass, error) {
	ctx, cancel := context.WithTimeout(ctx, defaults.MoveSweepPassTimeout)
	defer cancel()
	var out bucketsPass
	names, err := c.ListBuckets(ctx)
	if err != nil {
		return out, fmt.Errorf("listing the buckets of ObjectStore %q: %w", store.Name, err)
	}
	slices.Sort(names)
	cached, err := s.claims(ctx, s.Reconciler.Client)
	if err != nil {
		return out, err
	}
	// The API server is read after the tags, once the cache takes a bucket for a gone
	// claim's: a claim exists before any bucket is tagged for it, so one missing then
	// is gone for good.
	var fresh *claimIndex
	now := s.Clock.Now()
	for _, name := range names {
		if state.after != "" && name <= state.after {
			continue
		}
		if out.judged >= defaults.MoveSweepMaxBuckets || out.released >= defaults.MoveSweepMaxWrites {
			return out, nil // from this bucket on, next pass
		}
		if state.skips(name, cached, now) {
			state.after = name
			continue
		}
		out.judged++
		tags, err := c.GetBucketTagging(ctx, name)
		switch kind := s3.KindOf(err); {
		case err == nil:
		case kind == s3.KindNotFound:
			state.after = name
			continue // deleted since the listing
		case kind == s3.KindAccessDenied || kind == s3.KindInvalid || kind == s3.KindNotImplemented:
			// This bucket's answer (another region's, a policy of its own): the
			// sweep goes on, and reads it again after MoveSweepRecheck.
			state.remember(name, "", now)
			state.after = name
			continue
		default:
			return out, fmt.Errorf("reading the tags of bucket %q: %w", name, err) // the store: from this bucket on, later
		}
		uid, ok := s.sweptClaim(tags)
		switch {
		case !ok && s.releasedFrozen(tags):
			thawed, err := s.thawReleased(ctx, store, c, name)
			if err != nil {
				return out, err
			}
			if thawed {
				out.released++
			}
			state.remember(name, "", now)
		case !ok:
			state.remember(name, "", now)
		case cached.byUID[uid] != nil:
			state.remember(name, uid, now)
		default:
			if fresh == nil {
				if fresh, err = s.claims(ctx, s.APIReader); err != nil {
					return out, err
				}
			}
			if fresh.byUID[uid] != nil {
				state.remember(name, uid, now)
				break
			}
			wrote, err := s.judgeGone(ctx, store, c, name, tags)
			if err != nil {
				return out, err
			}
			if wrote {
				out.released++
			} else {
				state.remember(name, "", now)
			}
		}
		state.after = name
	}
	state.after, out.done = "", true
	state.prune(names)
	return out, nil
}

// judgeGone sees to a bucket of a gone claim: a copy a move left behind (tagged
// moved-to) is released as a Retain deletion releases it, frozen and tagged as moved;
// a source its move froze (the freeze in its policy, no moved-to tag: the claim went
// during the cutover, or while switching) is thawed, only the freeze's statement taken
// out of its policy, and released. Any other is the home a claim whose finalizer was
// removed left as it was (its tags still let a claim of the same namespace and name
// bind it): left alone. wrote says it was released.
func (s *MoveSweeper) judgeGone(ctx context.Context, store *bkv1.ObjectStore, c s3.Client, bucket string, tags map[string]string) (bool, error) {
	me := s.goneOwner(tags)
	if tags[bkv1.TagMovedTo] != "" {
		return true, s.release(ctx, store, c, bucket, me, tags, "a copy a move left behind")
	}
	if thawed, err := thawIfFrozen(ctx, c, bucket); err != nil || !thawed {
		return false, err
	}
	return true, s.release(ctx, store, c, bucket, me, tags, "the source of a move, frozen at its cutover and now thawed")
}

// thawIfFrozen takes a move's freeze out of bucket's policy when it holds one, and
// only the freeze's statement; thawed says it did.
func thawIfFrozen(ctx context.Context, c s3.Client, bucket string) (thawed bool, err error) {
	policy, err := c.GetBucketPolicy(ctx, bucket)
	if s3.KindOf(err) == s3.KindNotFound {
		return false, nil
	}
	if err != nil {
		return false, reconcile.AsStepError(err, fmt.Sprintf("reading the policy of bucket %q", bucket))
	}
	if !frozen(policy) {
		return false, nil
	}
	if err := thawBucket(ctx, c, bucket); err != nil {
		return false, err
	}
	return true, nil
}

// skips says whether a bucket's tags need not be read in this sweep.
func (a *accountSweep) skips(name string, cached *claimIndex, now time.Time) bool {
	seen, ok := a.seen[name]
	switch {
	case !ok:
		return false
	case seen.uid != "":
		return cached.byUID[seen.uid] != nil
	default:
		return now.Before(seen.until) && !cached.buckets[name]
	}
}

func (a *accountSweep) remember(name string, uid types.UID, now time.Time) {
	if a.seen == nil {
		a.seen = map[string]bucketSeen{}
	}
	a.seen[name] = bucketSeen{uid: uid, until: now.Add(defaults.MoveSweepRecheck)}
}

// prune forgets the buckets a full listing no longer shows.
func (a *accountSweep) prune(names []string) {
	for name := range a.seen {
		if _, found := slices.BinarySearch(names, name); !found {
			delete(a.seen, name)
		}
	}
}

func (s *MoveSweeper) accountSweep(key string) *accountSweep {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.accounts == nil {
		s.accounts = map[string]*accountSweep{}
	}
	a := s.accounts[key]
	if a == nil {
		a = &accountSweep{}
		s.accounts[key] = a
	}
	return a
}

// forgetAccountsExcept drops the sweeps of accounts no store reaches any more.
func (s *MoveSweeper) forgetAccountsExcept(keep map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.accounts {
		if !keep[key] {
			delete(s.accounts, key)
		}
	}
}

// releasedFrozen says whether a bucket's tags may be those of a source released while
// its move's freeze stayed: this cluster's, released (its uid tag names no claim), not
// a copy a move left behind (moved-to). The operator that made a claim's bucket carries
// out the claim's deletion policy itself when the claim vanishes before its restart
// (creates.go), from what the claim was when the bucket was made: a Retain release that
// knows nothing of the move, which leaves the freeze.
func (s *MoveSweeper) releasedFrozen(tags map[string]string) bool {
	claimUID, _, _ := parseUIDTag(tags[bkv1.TagUID])
	return s.Reconciler.ClusterID != "" && tags[bkv1.TagCluster] == s.Reconciler.ClusterID && tags[bkv1.TagClaim] != "" &&
		claimUID == "" && tags[bkv1.TagMovedTo] == ""
}

// thawReleased lifts a move's freeze from a released bucket no move left behind: no
// claim holds it, and nothing else would ever lift it.
func (s *MoveSweeper) thawReleased(ctx context.Context, store *bkv1.ObjectStore, c s3.Client, bucket string) (bool, error) {
	if thawed, err := thawIfFrozen(ctx, c, bucket); err != nil || !thawed {
		return false, err
	}
	s.event(ctx, store, corev1.EventTypeNormal, bkv1.EventReasonBucketReleased, "lifted a move's freeze from bucket %s, released without it", bucket)
	return true, nil
}
