package storagebucket

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/memo"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// MoveSweeper finds and removes what the operator made for a move that no longer
// exists, so that the cleanup of a move does not depend on the StorageBucket
// controller seeing its claim go: a tenant may remove the finalizer of a claim whose
// bucket is moving, and its mover would be left running with both stores' keys in a
// Secret of the operator's namespace, its checkpoints beside it, a half-copied bucket
// on the target that no claim tracks, and, past the cutover, a source whose writes
// are denied for good.
//
// A move no longer exists when no StorageBucket has the UID its ID starts with, or the
// claim's status.move names another move or an ended one. Every Interval (and sooner
// while a sweep is unfinished) it runs, on the leader only:
//
//   - sweep_moves.go: the movers' objects in the operator's namespace (mover.ListMoves),
//     by move: the movers are stopped, and for a claim that is gone the buckets the
//     move's record (mover.Recorded) names are seen to (the target emptied and deleted
//     unless the record says the controller saw its final pass verified, and so may
//     have switched to it; the frozen source thawed and released), then the Jobs,
//     ConfigMaps and Secrets are deleted. For a claim that lives on (an earlier move of
//     it), only its objects go, and only once seen stale on two sweeps
//     MoveSweepStaleGrace apart: its buckets are the claim's.
//   - sweep_buckets.go: the buckets of every store, listed and judged by their tags a
//     bounded, paced page at a time, for the copies moves left of claims that are gone
//     (released) and the sources frozen by a move whose claim went (thawed and
//     released). Only buckets tagged for this cluster and for a UID no claim has are
//     ever released; of the released ones, only a frozen source no move left behind
//     (no moved-to tag) is thawed.
type MoveSweeper struct {
	// Reconciler lends its helpers: the stores' registry, the cluster id, the clock,
	// and what a move's cleanup does (removeBucketOf, thawBucket).
	Reconciler *Reconciler
	// APIReader reads the API server, across shards and namespaces: nothing is
	// removed on the cache's word alone.
	APIReader client.Reader
	// Direct reads and deletes the movers' objects in Namespace, uncached (the
	// manager watches no ConfigMaps or Jobs); nil, or Namespace empty: no mover ran.
	Direct    client.Client
	Namespace string
	// Runner stops a move's movers (the in-process ones live only in its memory);
	// nil when moves are refused.
	Runner   mover.Runner
	Recorder events.EventRecorder
	Clock    clock.WithTicker
	// Interval is the time between two sweeps (default defaults.AccessCollectInterval).
	Interval time.Duration
	// Leases, with several shards, limits the bucket sweep to the stores whose
	// health-check Lease this shard holds; nil: every store.
	Leases *stores.Leases
	// Observe sees every S3 request the sweep sends, by store (metrics); may be nil.
	Observe func(store, op string, status int, err error)

	mu sync.Mutex
	// accounts is each account's bucket sweep (by endpoint and key id).
	accounts map[string]*accountSweep
	// stale: when each move of a live claim was first seen stale; stopped: when the
	// movers of each gone claim's move were first seen stopped.
	stale, stopped map[string]time.Time
	// nextMoves is when the movers' objects are looked at next.
	nextMoves time.Time
	clients   memo.Versioned[string, s3.Client]
	// clientNames are the stores clients holds a client of.
	clientNames map[string]bool
	// clientFor, when set, replaces the sweep's own S3 clients (tests).
	clientFor func(ctx context.Context, store *bkv1.ObjectStore) (s3.Client, error)
}

// NeedLeaderElection: only the leader sweeps.
func (s *MoveSweeper) NeedLeaderElection() bool { return true }

// Start runs sweeps until ctx ends: the movers' objects and the stores' buckets each on
// a schedule of its own, so that a long pass over many stores' buckets never holds back
// the removal of a gone move's Jobs and keys.
func (s *MoveSweeper) Start(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.every(ctx, s.movesDue)
	}()
	s.every(ctx, s.bucketsDue)
	<-done
	return nil
}

// every runs sweep until ctx ends, waiting between two runs as long as it says.
func (s *MoveSweeper) every(ctx context.Context, sweep func(context.Context) time.Duration) {
	for {
		wait := max(sweep(ctx), defaults.AccessCollectContinue)
		select {
		case <-ctx.Done():
			return
		case <-s.Clock.After(wait):
		}
	}
}

func (s *MoveSweeper) interval() time.Duration {
	if s.Interval > 0 {
		return s.Interval
	}
	return defaults.AccessCollectInterval
}

// movesDue sweeps the movers' objects when due, and says how long until it is due
// again.
func (s *MoveSweeper) movesDue(ctx context.Context) time.Duration {
	now := s.Clock.Now()
	if !now.Before(s.nextMoves) {
		result, err := s.sweepMoves(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.FromContext(ctx).Info("move sweep failed; retrying later", "error", err.Error())
			s.nextMoves = now.Add(min(s.interval(), time.Minute))
		case result.unfinished > 0:
			s.nextMoves = now.Add(defaults.AccessCollectContinue)
		case result.failed > 0:
			s.nextMoves = now.Add(min(s.interval(), time.Minute))
		default:
			s.nextMoves = now.Add(s.interval())
		}
	}
	return s.nextMoves.Sub(s.Clock.Now())
}

// bucketsDue sweeps each account's buckets that is due, and says how long until the
// next is.
func (s *MoveSweeper) bucketsDue(ctx context.Context) time.Duration {
	wait, err := s.sweepBuckets(ctx)
	if err != nil && ctx.Err() == nil {
		log.FromContext(ctx).Info("listing ObjectStores for the move sweep failed; retrying later", "error", err.Error())
		return min(s.interval(), 10*time.Second)
	}
	return wait
}

// claimIndex is every StorageBucket by its UID without dashes (what move IDs hold),
// and by UID.
type claimIndex struct {
	byHex map[string]*bkv1.StorageBucket
	byUID map[types.UID]*bkv1.StorageBucket
	// buckets: every bucket name a claim records, on any store.
	buckets map[string]bool
}

// claims reads every StorageBucket through r.
func (s *MoveSweeper) claims(ctx context.Context, r client.Reader) (*claimIndex, error) {
	list := &bkv1.StorageBucketList{}
	if err := r.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing StorageBuckets: %w", err)
	}
	x := &claimIndex{byHex: map[string]*bkv1.StorageBucket{}, byUID: map[types.UID]*bkv1.StorageBucket{}, buckets: map[string]bool{}}
	for i := range list.Items {
		sb := &list.Items[i]
		x.byHex[strings.ReplaceAll(string(sb.UID), "-", "")] = sb
		x.byUID[sb.UID] = sb
		if b := knownBucket(sb); b != "" {
			x.buckets[b] = true
		}
	}
	return x, nil
}

// goneOwner is the owner a bucket's tags name, for a claim that is gone: built from
// the tags themselves, since no object is left to build it from.
func (s *MoveSweeper) goneOwner(tags map[string]string) owner {
	claimUID, namespace, _ := parseUIDTag(tags[bkv1.TagUID])
	return owner{claim: tags[bkv1.TagClaim], uid: claimUID, namespace: namespace, cluster: s.Reconciler.ClusterID}
}

// stub is a StorageBucket standing for a gone claim in the calls that take one
// (removeBucketOf): its namespace and name are those its tag names (a claim tag
// shortened with a hash is reproduced as it is: see claimTag), its UID the tag's.
func stub(o owner) *bkv1.StorageBucket {
	sb := &bkv1.StorageBucket{}
	sb.Namespace, sb.Name, _ = strings.Cut(o.claim, "/")
	sb.UID = o.uid
	return sb
}

// sweptClaim is the UID a bucket's tags name, if they make it a bucket of this cluster
// the sweep may judge: tagged with this cluster's id (never a bucket without the tag,
// or another cluster's) and a claim's UID (a released bucket names none).
func (s *MoveSweeper) sweptClaim(tags map[string]string) (types.UID, bool) {
	if s.Reconciler.ClusterID == "" || tags[bkv1.TagCluster] != s.Reconciler.ClusterID || tags[bkv1.TagClaim] == "" {
		return "", false
	}
	claimUID, _, _ := parseUIDTag(tags[bkv1.TagUID])
	return claimUID, claimUID != ""
}

// frozen says whether a bucket policy holds a move's freeze.
func frozen(policy string) bool {
	_, statements, err := parsePolicyDoc(policy)
	if err != nil {
		return false
	}
	for _, st := range statements {
		if isFreeze(st) {
			return true
		}
	}
	return false
}

// releaseGone releases a bucket of a gone claim as a Retain deletion would: its uid
// tag keeps only the namespace's part, so only a claim of the same namespace and name
// binds it again, and the rest of its tags (moved-to, deletion-blocked) stay.
func releaseGone(ctx context.Context, c s3.Client, bucket string, me owner, tags map[string]string) error {
	released := withoutSystemTags(tags)
	delete(released, bkv1.TagUID)
	for k, v := range me.releasedTags() {
		released[k] = v
	}
	if err := c.PutBucketTagging(ctx, bucket, released); err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("releasing bucket %q", bucket))
	}
	return nil
}

// storesAt are the ObjectStores (not being deleted) whose endpoint is endpoint, by
// name.
func storesAt(list []bkv1.ObjectStore, endpoint string) []*bkv1.ObjectStore {
	var out []*bkv1.ObjectStore
	for i := range list {
		if list[i].Spec.Endpoint == endpoint && list[i].DeletionTimestamp.IsZero() {
			out = append(out, &list[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// account names the account store's key reaches (endpoint and key id): stores
// sharing one see the same buckets, and are swept once.
func (s *MoveSweeper) account(ctx context.Context, store *bkv1.ObjectStore) (string, error) {
	ref := store.Spec.CredentialsSecretRef
	if ref == nil || s.clientFor != nil {
		return store.Spec.Endpoint + "\x00", nil
	}
	secret, err := s.Reconciler.Stores.SecretData(ctx, ref)
	if err != nil {
		return "", err
	}
	return store.Spec.Endpoint + "\x00" + string(secret.Data[bkv1.CredentialsKeyAccessKeyID]), nil
}

// perAccount is one store of each account among list (the first by name), with its
// account.
func (s *MoveSweeper) perAccount(ctx context.Context, list []*bkv1.ObjectStore) (map[string]*bkv1.ObjectStore, []string) {
	out := map[string]*bkv1.ObjectStore{}
	var order []string
	for _, store := range list {
		account, err := s.account(ctx, store)
		if err != nil {
			log.FromContext(ctx).Info("move sweep: cannot read the store's credentials; retrying later", "store", store.Name, "error", err.Error())
			continue
		}
		if _, seen := out[account]; !seen {
			out[account] = store
			order = append(order, account)
		}
	}
	return out, order
}

// client is the sweep's own client of store: the store's credentials, paced at the
// sweep's share of its request budget (defaults.MoveSweepShareOfBudget, at most
// defaults.MoveSweepRequestsPerSecond), as a move's mover has its own share. Its
// requests are the sweep's alone: the reconciles' budget is not spent on them.
func (s *MoveSweeper) client(ctx context.Context, store *bkv1.ObjectStore) (s3.Client, error) {
	if s.clientFor != nil {
		return s.clientFor(ctx, store)
	}
	var version string
	var data map[string][]byte
	if ref := store.Spec.CredentialsSecretRef; ref != nil {
		secret, err := s.Reconciler.Stores.SecretData(ctx, ref)
		if err != nil {
			return nil, err
		}
		data, version = secret.Data, secret.ResourceVersion
	}
	s.mu.Lock()
	if s.clientNames == nil {
		s.clientNames = map[string]bool{}
	}
	s.clientNames[store.Name] = true
	s.mu.Unlock()
	return s.clients.Get(store.Name, fmt.Sprintf("%s/%d/%s", store.UID, store.Generation, version), func() (s3.Client, error) {
		perSecond, burst := s.Reconciler.Stores.Budget(store)
		rate := float64(defaults.MoveSweepRequestsPerSecond)
		if perSecond > 0 {
			rate = min(rate, perSecond*defaults.MoveSweepShareOfBudget)
			burst = max(1, min(int(float64(burst)*defaults.MoveSweepShareOfBudget), defaults.MoveSweepBurst))
		} else {
			burst = defaults.MoveSweepBurst
		}
		cfg := s3.Config{
			Endpoint: store.Spec.Endpoint, Region: stores.Region(store), ForcePathStyle: store.Spec.ForcePathStyle,
			AccessKeyID:     string(data[bkv1.CredentialsKeyAccessKeyID]),
			SecretAccessKey: string(data[bkv1.CredentialsKeySecretAccessKey]),
			SessionToken:    string(data[bkv1.CredentialsKeySessionToken]),
			CABundle:        []byte(store.Spec.CABundle), InsecureSkipTLSVerify: store.Spec.InsecureSkipTLSVerify,
			RequestsPerSecond: rate, Burst: burst, RequestTimeout: s.Reconciler.Stores.RequestTimeout,
		}
		if s.Observe != nil {
			name := store.Name
			cfg.Observer = func(op string, status int, err error) { s.Observe(name, op, status, err) }
		}
		factory := s.Reconciler.Stores.Factory
		if factory == nil {
			factory = s3.New
		}
		return factory(ctx, cfg)
	})
}

// forgetClientsExcept drops the clients of stores that are gone.
func (s *MoveSweeper) forgetClientsExcept(keep map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.clientNames {
		if !keep[name] {
			s.clients.Forget(name)
			delete(s.clientNames, name)
		}
	}
}
