package bucketaccess

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// Collector deletes the IAM users of this cluster that no BucketAccess grants
// any more, so that revocation does not depend on the BucketAccess controller seeing
// the access go: a tenant may remove the operator's finalizer and delete its access,
// re-point it at another store, or delete its StorageBucket before the access's status
// was first written, and every time a user with a working key would stay behind.
// Grants name buckets by name, so such a key would read whoever gets the name next.
//
// It runs on the leader only (one per shard). Every Interval it lists the users of
// each IAM store that answers (AccessProviderReady), page by page, judges each (see
// accessIndex.judge) first against the cache and, for every user it would delete,
// again against the API server, and deletes the user's keys, policy and the user.
// A user whose name is not of this cluster's form and hashes from none of its
// accesses is never deleted. Each pass is bounded (defaults.AccessCollect*) and its
// IAM calls paced; a sweep that does not fit in one pass continues after the last
// user it judged, also inside a page (SeaweedFS answers every user in one page,
// whatever MaxItems asks), so every sweep reaches every user.
type Collector struct {
	// Client reads the manager's cache: the cheap first look at every user.
	Client client.Reader
	// APIReader reads the API server, across shards and namespaces: no user is
	// deleted on the cache's word alone.
	APIReader client.Reader
	Access    *stores.AccessProviders
	Recorder  events.EventRecorder
	Clock     clock.WithTicker
	ClusterID string
	// Interval is the time between two sweeps of a store (default
	// defaults.AccessCollectInterval).
	Interval time.Duration
	// Leases, with several shards, limits the collector to the stores whose
	// health-check Lease this shard holds; nil: every store.
	Leases *stores.Leases
	// OnRevoked hears of each deleted user that belonged to a live access, so the
	// BucketAccess controller forgets what it last wrote for it; may be nil.
	OnRevoked func(types.UID)
	// OnPass hears of every pass over a store, with the number of users whose keys it
	// listed and whether it ended a sweep (metrics); may be nil.
	OnPass func(store string, keyChecks int, sweepDone bool)
	// RequestsPerSecond and Burst pace the collector's IAM calls over all stores
	// (defaults.AccessCollectRequestsPerSecond and AccessCollectBurst when zero).
	RequestsPerSecond float64
	Burst             int

	mu      sync.Mutex
	stores  map[string]*collectorState
	limiter *rate.Limiter
}

// collectorState is one store's sweep: where it stands and when it goes on.
type collectorState struct {
	marker string // ListUsers marker of the page the sweep is in
	// after is the last user judged in that page, in name order: the next pass
	// skips the page's users up to it.
	after string
	due   time.Time
	// legacy remembers the legacy-form users (bk-<40 hex>) seen to belong to an
	// access, by name: once that access is gone nothing else tells they are ours.
	legacy map[string]types.UID
	// held remembers the users of other stores' accesses found holding their
	// access's key, so they are not listed again every sweep (see heldKey).
	held map[string]heldKey
	// generation is the store's, when held was filled: another spec may name
	// another account, whose users of the same names are other users.
	generation int64
	// oversized: the store answered a ListUsers page with more users than MaxItems
	// asked for (logged once).
	oversized bool
	// roles is the sweep of the store's roles (collector_roles.go).
	roles roleSweep
}

// heldKey: the user was found holding one of keys (its access's key ids, joined), and
// is taken to hold it until then, or until the access's keys change.
type heldKey struct {
	keys  string
	until time.Time
}

// collectPass is the outcome of one pass, for logs and tests.
type collectPass struct {
	// judged users, of which checked had their keys listed and revoked were
	// deleted; requests is the IAM calls the pass sent (about: a deletion counts
	// as deleteUserCost).
	judged, checked, revoked, requests int
	// done: the sweep reached the last page.
	done bool
}

// deleteUserCost is what a pass counts, and paces, for one DeleteUser: its
// ListAccessKeys, DeleteAccessKey, DeleteUserPolicy and DeleteUser.
const deleteUserCost = 4

// NeedLeaderElection: only the leader deletes users.
func (c *Collector) NeedLeaderElection() bool { return true }

// Start runs passes until ctx ends.
func (c *Collector) Start(ctx context.Context) error {
	for {
		wait := c.collectDue(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-c.Clock.After(wait):
		}
	}
}

func (c *Collector) interval() time.Duration {
	if c.Interval > 0 {
		return c.Interval
	}
	return defaults.AccessCollectInterval
}

// collectDue runs a pass on every IAM store that is due and says how long until the
// next one is.
func (c *Collector) collectDue(ctx context.Context) time.Duration {
	next := c.interval()
	list := &bkv1.ObjectStoreList{}
	if err := c.Client.List(ctx, list); err != nil {
		log.FromContext(ctx).Error(err, "listing ObjectStores for the access collector")
		return min(next, 10*time.Second)
	}
	seen := map[string]bool{}
	for i := range list.Items {
		store := &list.Items[i]
		if stores.AccessProviderOf(store) != bkv1.AccessProviderIAM || !store.DeletionTimestamp.IsZero() {
			continue
		}
		seen[store.Name] = true
		state := c.state(store.Name)
		if wait := state.due.Sub(c.Clock.Now()); wait > 0 {
			next = min(next, wait)
			continue
		}
		if _, err := c.collectStore(ctx, store); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Info("access collector pass failed; retrying later", "store", store.Name, "error", err.Error())
		}
		next = min(next, max(state.due.Sub(c.Clock.Now()), 0))
	}
	c.forgetExcept(seen)
	return max(next, defaults.AccessCollectContinue)
}

// collectStore runs one pass on store, if it is this shard's and its IAM endpoint
// answers, and schedules the next.
func (c *Collector) collectStore(ctx context.Context, store *bkv1.ObjectStore) (collectPass, error) {
	state := c.state(store.Name)
	retry := func() { state.due = c.Clock.Now().Add(min(c.interval(), time.Minute)) }
	if !reconcile.ConditionIsTrue(store.Status.Conditions, bkv1.ConditionAccessProviderReady) {
		retry() // the health check says why; nothing can be listed now
		return collectPass{}, nil
	}
	if c.Leases != nil {
		if mine, err := c.Leases.HeldHere(ctx, store.Name); err != nil || !mine {
			state.due = c.Clock.Now().Add(c.interval())
			return collectPass{}, err
		}
	}
	driver, err := c.Access.DriverFor(ctx, store)
	if err != nil {
		retry()
		return collectPass{}, err
	}
	pass, err := c.pass(ctx, store, driver, state)
	if err == nil {
		err = c.collectRoles(ctx, store, driver, state, &pass)
	}
	if c.OnPass != nil {
		c.OnPass(store.Name, pass.checked, pass.done)
	}
	switch {
	case err != nil:
		retry()
	case pass.done:
		state.due = c.Clock.Now().Add(c.interval())
	default:
		state.due = c.Clock.Now().Add(defaults.AccessCollectContinue)
	}
	if pass.revoked > 0 || err != nil {
		log.FromContext(ctx).Info("access collector pass", "store", store.Name, "judged", pass.judged, "keyChecks", pass.checked,
			"revoked", pass.revoked, "requests", pass.requests, "sweepDone", pass.done)
	}
	return pass, err
}

// errPassFull stops a pass that reached one of its bounds.
var errPassFull = errors.New("pass bound reached")

// pass judges users from where the sweep stands (state.marker, state.after) on,
// within the pass's bounds.
func (c *Collector) pass(ctx context.Context, store *bkv1.ObjectStore, driver iam.Driver, state *collectorState) (collectPass, error) {
	ctx, cancel := context.WithTimeout(ctx, defaults.AccessCollectPassTimeout)
	defer cancel()
	var out collectPass
	cached, err := c.index(ctx, c.Client)
	if err != nil {
		return out, err
	}
	state.startSweep(store.Generation, c.Clock.Now())
	for out.judged < defaults.AccessCollectMaxUsers {
		if err := c.pace(ctx, &out, 1); err != nil {
			return out, err
		}
		page, err := driver.ListUsers(ctx, state.marker, defaults.AccessCollectPageSize)
		if err != nil {
			if state.marker != "" && iam.KindOf(err) == iam.KindInvalid {
				state.marker, state.after = "", "" // a marker the server no longer takes: start over
			}
			return out, err
		}
		if len(page.Names) > defaults.AccessCollectPageSize && !state.oversized {
			state.oversized = true
			log.FromContext(ctx).Info("the store answers ListUsers with more users than MaxItems asks for; the access collector goes through its answer by name",
				"store", store.Name, "users", len(page.Names), "maxItems", defaults.AccessCollectPageSize)
		}
		// In name order, so that a pass that stops inside the page (a bound, or a
		// page of every user) is continued after the last user it judged, whatever
		// order the store answers in.
		names := slices.Sorted(slices.Values(page.Names))
		// The API server is read after the page, once the cache proposes a deletion:
		// every user of the page then existed before that read, and so did its
		// access (an access exists before its user), so a new access is never
		// missed and its user taken for an orphan.
		var fresh *accessIndex
		for _, user := range names {
			if state.after != "" && user <= state.after {
				continue
			}
			if out.judged >= defaults.AccessCollectMaxUsers {
				return out, nil
			}
			err := c.consider(ctx, store, driver, state, user, cached, &fresh, &out)
			if errors.Is(err, errPassFull) {
				return out, nil // from this user on, next pass
			}
			if err != nil {
				return out, err
			}
			state.after = user
			out.judged++
		}
		state.marker, state.after = page.Next, ""
		if page.Next == "" {
			out.done = true
			return out, nil
		}
	}
	return out, nil
}

// consider judges one user and deletes it if both the cache and the API server
// say it is no live grant's.
func (c *Collector) consider(ctx context.Context, store *bkv1.ObjectStore, driver iam.Driver, state *collectorState, user string,
	cached *accessIndex, fresh **accessIndex, out *collectPass) error {
	verdict, f := cached.judge(user, store.Name, state.legacy)
	if f != nil && !iam.OwnedUserName(c.ClusterID, user) {
		state.legacy[user] = f.uid
	}
	if verdict == verdictCheckKeys && state.holds(user, f, c.Clock.Now()) {
		return nil // found holding this key before: deleting is not proposed
	}
	if verdict != verdictCheckKeys && verdict != verdictIssuing && !verdict.revokes() {
		return nil
	}
	if *fresh == nil {
		x, err := c.index(ctx, c.APIReader)
		if err != nil {
			return err
		}
		*fresh = x
	}
	verdict, f = (*fresh).judge(user, store.Name, state.legacy)
	if verdict == verdictCheckKeys {
		if out.checked >= defaults.AccessCollectMaxKeyChecks {
			return errPassFull
		}
		if err := c.pace(ctx, out, 1); err != nil {
			return err
		}
		out.checked++
		keys, err := driver.ListKeys(ctx, user)
		if err != nil && iam.KindOf(err) != iam.KindNoSuchEntity {
			return err
		}
		if holdsAccessKey(f, keys) {
			state.hold(user, f, c.Clock.Now())
			return nil
		}
		verdict = verdictMovedAway
	}
	if verdict == verdictIssuing {
		same, err := c.sameUserAs(ctx, f.store, driver, user, out)
		if same || err != nil {
			return err
		}
		verdict = verdictMovedAway
	}
	if !verdict.revokes() {
		return nil
	}
	if out.revoked >= defaults.AccessCollectMaxDeletions {
		return errPassFull
	}
	if err := c.pace(ctx, out, deleteUserCost); err != nil {
		return err
	}
	if err := driver.DeleteUser(ctx, user); err != nil {
		return err
	}
	out.revoked++
	delete(state.legacy, user)
	delete(state.held, user)
	c.report(ctx, store, user, verdict, f)
	return nil
}

// sameUserAs settles verdictIssuing: the user (listed here, by driver) holds no key,
// or one that the user of that name on store there, where its access is being issued,
// holds too: one IAM account behind both stores, one user. When that store is gone or
// issues no keys the user goes; when it does not answer, the user is kept until a
// later sweep (a failure there never stops the sweep here).
func (c *Collector) sameUserAs(ctx context.Context, there string, driver iam.Driver, user string, out *collectPass) (bool, error) {
	if out.checked+2 > defaults.AccessCollectMaxKeyChecks {
		return false, errPassFull
	}
	if err := c.pace(ctx, out, 1); err != nil {
		return false, err
	}
	out.checked++
	keys, err := driver.ListKeys(ctx, user)
	if err != nil && iam.KindOf(err) != iam.KindNoSuchEntity {
		return false, err
	}
	if len(keys) == 0 {
		return true, nil // no key reaches anything: nothing to take away yet
	}
	store := &bkv1.ObjectStore{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: there}, store); err != nil || stores.AccessProviderOf(store) != bkv1.AccessProviderIAM {
		return false, client.IgnoreNotFound(err)
	}
	// That store not answering never stops the sweep here: the user is kept for now.
	unasked := func(err error) (bool, error) {
		log.FromContext(ctx).Info("access collector: cannot ask the store an access is being issued on; its user here is kept for now", "store", there, "user", user, "error", err.Error())
		return true, nil
	}
	theirs, err := c.Access.DriverFor(ctx, store)
	if err != nil {
		return unasked(err)
	}
	if err := c.pace(ctx, out, 1); err != nil {
		return false, err
	}
	out.checked++
	other, err := theirs.ListKeys(ctx, user)
	if err != nil && iam.KindOf(err) != iam.KindNoSuchEntity {
		return unasked(err)
	}
	for _, k := range keys {
		if hasKey(other, k.ID) {
			return true, nil
		}
	}
	return false, nil
}

// pace waits for n of the collector's request tokens and counts them in out.
func (c *Collector) pace(ctx context.Context, out *collectPass, n int) error {
	c.mu.Lock()
	if c.limiter == nil {
		perSecond, burst := c.RequestsPerSecond, c.Burst
		if perSecond <= 0 {
			perSecond = defaults.AccessCollectRequestsPerSecond
		}
		if burst <= 0 {
			burst = defaults.AccessCollectBurst
		}
		c.limiter = rate.NewLimiter(rate.Limit(perSecond), max(burst, deleteUserCost))
	}
	limiter := c.limiter
	c.mu.Unlock()
	out.requests += n
	return limiter.WaitN(ctx, n)
}

// startSweep, at the start of a sweep, drops what held remembers past its time, and
// all of it when the store's spec changed since.
func (s *collectorState) startSweep(generation int64, now time.Time) {
	if s.generation != generation {
		s.held, s.generation = nil, generation
	}
	if s.marker != "" || s.after != "" {
		return
	}
	for user, h := range s.held {
		if !now.Before(h.until) {
			delete(s.held, user)
		}
	}
}

// holds says whether user was found holding one of f's current keys within
// defaults.AccessCollectKeyRecheck.
func (s *collectorState) holds(user string, f *accessFacts, now time.Time) bool {
	h, ok := s.held[user]
	return ok && f != nil && h.keys == strings.Join(f.keyIDs, ",") && now.Before(h.until)
}

func (s *collectorState) hold(user string, f *accessFacts, now time.Time) {
	if s.held == nil {
		s.held = map[string]heldKey{}
	}
	s.held[user] = heldKey{keys: strings.Join(f.keyIDs, ","), until: now.Add(defaults.AccessCollectKeyRecheck)}
}

// report logs a deletion and records an Event: on the access when it still exists
// (its tenant learns why its key stopped working), else on the store.
func (c *Collector) report(ctx context.Context, store *bkv1.ObjectStore, user string, verdict userVerdict, f *accessFacts) {
	log.FromContext(ctx).Info("deleted an IAM user no BucketAccess grants", "store", store.Name, "user", user, "why", verdict.String())
	if f == nil || verdict == verdictOrphan {
		if c.Recorder != nil {
			c.Recorder.Eventf(store, nil, corev1.EventTypeNormal, bkv1.ReasonRevoking, "Collect", "deleted IAM user %s, its keys and policy: %s", user, verdict)
		}
		return
	}
	if c.OnRevoked != nil {
		c.OnRevoked(f.uid)
	}
	if c.Recorder != nil {
		ba := &bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: f.key.Namespace, Name: f.key.Name, UID: f.uid}}
		c.Recorder.Eventf(ba, nil, corev1.EventTypeNormal, bkv1.ReasonRevoking, "Collect", "deleted IAM user %s on store %s: %s", user, store.Name, verdict)
	}
}

// index reads every BucketAccess and StorageBucket through r.
func (c *Collector) index(ctx context.Context, r client.Reader) (*accessIndex, error) {
	accesses := &bkv1.BucketAccessList{}
	if err := r.List(ctx, accesses); err != nil {
		return nil, fmt.Errorf("listing BucketAccesses: %w", err)
	}
	buckets := &bkv1.StorageBucketList{}
	if err := r.List(ctx, buckets); err != nil {
		return nil, fmt.Errorf("listing StorageBuckets: %w", err)
	}
	return newAccessIndex(c.ClusterID, accesses.Items, buckets.Items), nil
}

func (c *Collector) state(store string) *collectorState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stores == nil {
		c.stores = map[string]*collectorState{}
	}
	s := c.stores[store]
	if s == nil {
		s = &collectorState{legacy: map[string]types.UID{}}
		c.stores[store] = s
	}
	return s
}

// forgetExcept drops the sweeps of stores that are gone or no longer IAM.
func (c *Collector) forgetExcept(keep map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.stores {
		if !keep[name] {
			delete(c.stores, name)
		}
	}
}
