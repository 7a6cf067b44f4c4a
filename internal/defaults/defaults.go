// Package defaults holds every default value of the operator in one place: the
// manager's flags (cmd/bucketkeeper), the development command (cmd/bucketkeeper-dev),
// operator.Options' defaulting and the controllers' fallbacks all read them here, and
// the values the CRDs default to (+kubebuilder:default) are checked against them
// (TestCRDDefaultsAgree), so the documentation, the flags and the code cannot drift.
package defaults

import "time"

// Manager-wide defaults: the flags of cmd/bucketkeeper and operator.Options.
const (
	MetricsBindAddress     = ":8080"
	HealthProbeBindAddress = ":8081"

	LeaderElectionID = "bucketkeeper.io"
	// LeaseDuration, RenewDeadline and RetryPeriod are controller-runtime's own.
	LeaseDuration = 15 * time.Second
	RenewDeadline = 10 * time.Second
	RetryPeriod   = 2 * time.Second

	// KubeAPIQPS and KubeAPIBurst pace the manager's requests to the API server.
	KubeAPIQPS   = 50
	KubeAPIBurst = 100

	// Concurrency is the number of StorageBuckets reconciled at once, and of BucketAccesses.
	Concurrency = 4
	// SyncInterval is how often each bucket's configuration is re-read to correct drift.
	SyncInterval = 10 * time.Minute
	// StatusHeartbeat bounds how often a timestamp alone is rewritten in status.
	StatusHeartbeat = 5 * time.Minute
	// S3RequestTimeout bounds every S3 call, SDK retries included.
	S3RequestTimeout = 30 * time.Second
	// IAMRequestTimeout bounds every IAM call, SDK retries included.
	IAMRequestTimeout = 10 * time.Second
	// MinIOAdminRequestTimeout bounds every call to MinIO's admin API (its IAM): each
	// derives four argon2id keys of 64 MiB, two on each side, one at a time per process
	// (internal/iam's argon2Slot), so a burst of them on a busy machine outlasts an IAM
	// call's deadline; it gets an S3 call's.
	MinIOAdminRequestTimeout = S3RequestTimeout
	// ReconcileTimeout bounds each reconcile as a whole.
	ReconcileTimeout = 2 * time.Minute
	// CreateSettleTime is how long after the operator stopped waiting for the answer
	// to a CreateBucket (a timeout, a dropped connection, a server error) the store is
	// still expected to carry it out, if it ever does: until then the claim's deletion
	// does not take a missing bucket for one that will never be there.
	CreateSettleTime = 30 * time.Second

	// ProbeInterval applies to StorageBuckets without spec.probe.interval.
	ProbeInterval = time.Minute
	// MinProbeRequestInterval bounds on-demand probes to one per bucket per interval.
	MinProbeRequestInterval = 10 * time.Second

	// AccessKeyGrace is how long a replaced BucketAccess key stays valid after the
	// Secret received its successor, so running pods can reload.
	AccessKeyGrace = 10 * time.Minute

	// UsageInterval is the least time between two reads of a bucket's usage from its
	// store's admin API (each rides on a probe).
	UsageInterval = 5 * time.Minute
	// UsageRewrite is how old status.usage may get before an unchanged measurement is
	// written again.
	UsageRewrite = time.Hour

	// ShardCount is the number of operator deployments sharing the stores.
	ShardCount = 1

	// ReceiverMaxConnections caps the probe webhook's open connections, and so the
	// request bodies it holds at once (at most 64 KiB each: 4 MiB in all).
	ReceiverMaxConnections = 64
	// ReceiverKeyRequestsPerSecond and ReceiverKeyBurst bound the signed requests the
	// probe webhook serves per key (each may cost an annotation write), so one key's
	// holder cannot spend the others' budget.
	ReceiverKeyRequestsPerSecond = 20
	ReceiverKeyBurst             = 40
	// ReceiverRequestsPerSecond and ReceiverBurst bound them for all keys together,
	// per replica, so that many keys cannot flood the API server either.
	ReceiverRequestsPerSecond = 40
	ReceiverBurst             = 80

	// AccessCollectInterval is how often the IAM users of each IAM store are listed
	// to delete those no BucketAccess grants any more (see AccessCollect* below): the
	// longest a key outlives its grant when the BucketAccess controller did not
	// revoke it (a finalizer removed by hand, a crash before a status write).
	AccessCollectInterval = 5 * time.Minute
)

// Bounds of one collector pass over one store. A pass that reaches one stops there
// and the next pass continues after the last user it judged (in that page, even when
// the store answers every user in one page whatever MaxItems asks) after
// AccessCollectContinue, so a store with many users is swept in several short passes.
const (
	// AccessCollectPageSize is the MaxItems of each ListUsers page.
	AccessCollectPageSize = 100
	// AccessCollectMaxUsers is how many users one pass judges.
	AccessCollectMaxUsers = 1000
	// AccessCollectMaxDeletions is how many users one pass deletes (each costs a
	// ListAccessKeys, a DeleteAccessKey per key, a DeleteUserPolicy and a DeleteUser).
	AccessCollectMaxDeletions = 20
	// AccessCollectMaxKeyChecks is how many users one pass lists the keys of to see
	// whether they are another store's (accounts shared between stores).
	AccessCollectMaxKeyChecks = 100
	// AccessCollectPassTimeout bounds one pass over one store (every IAM call has
	// its own deadline too).
	AccessCollectPassTimeout = time.Minute
	// AccessCollectContinue is the pause before a pass that continues a sweep.
	AccessCollectContinue = time.Second
	// AccessCollectRequestsPerSecond and AccessCollectBurst pace the collector's IAM
	// calls (a token bucket over every store it sweeps): a sweep of many users is
	// spread out rather than sent as fast as the store answers.
	AccessCollectRequestsPerSecond = 10
	AccessCollectBurst             = 10
	// AccessCollectKeyRecheck is how long a user of another store's access, found
	// holding that access's key (the stores share one IAM account), is not listed
	// again while the access's keys stay the same.
	AccessCollectKeyRecheck = time.Hour
	// AccessCollectRoleIssuing is how long a role of a keyless access that is Ready on
	// another store, and has recorded no role there yet, is kept by the sweep of a
	// store it is listed on: that access may be recording this very role right now,
	// through another store of the same IAM account.
	AccessCollectRoleIssuing = 2 * time.Minute
)

// The sweep of move leftovers (storagebucket.MoveSweeper) runs every
// AccessCollectInterval, on each account's buckets a bounded pass at a time: a pass
// that reaches a bound stops there, and the next continues after the last bucket it
// judged after AccessCollectContinue.
const (
	// MoveSweepMaxBuckets is how many buckets one pass reads the tags of, per
	// account (endpoint and key).
	MoveSweepMaxBuckets = 200
	// MoveSweepMaxWrites is how many buckets one pass thaws or releases, per account.
	MoveSweepMaxWrites = 20
	// MoveSweepPassTimeout bounds one pass over one account (every call has its own
	// deadline too).
	MoveSweepPassTimeout = time.Minute
	// MoveSweepRequestsPerSecond and MoveSweepBurst pace the sweep's requests to one
	// store; a store with a request budget gets at most MoveSweepShareOfBudget of it.
	MoveSweepRequestsPerSecond = 10
	MoveSweepBurst             = 10
	MoveSweepShareOfBudget     = 0.1
	// MoveSweepRecheck is how long a bucket found to be no leftover (released,
	// another cluster's, or the home a gone claim abandoned) is not read again, unless
	// a claim names it meanwhile. A bucket of a live claim is not read again while that
	// claim lives.
	MoveSweepRecheck = 30 * time.Minute
	// MoveSweepStaleGrace: the movers' objects of a live claim's earlier move are
	// deleted only when two sweeps at least this far apart found them stale, so a
	// move whose status is not written yet (a pass takes up to ReconcileTimeout) is
	// never taken for an old one.
	MoveSweepStaleGrace = ReconcileTimeout + time.Minute
	// MoveSweepJobStopGrace is how long after a mover Job's deletion, its status
	// counting no pod left, the buckets of its move are touched: its pods had their
	// grace period (10 s) to stop.
	MoveSweepJobStopGrace = 30 * time.Second
)

// MaxReconcilesPerStore is the default cap on the StorageBucket reconciles one store may
// have in flight while there are two or more stores: three quarters of concurrency and
// always at least one worker less, so other stores keep at least one (with concurrency 1
// there is nothing to share: 1). A single store may have every worker but one.
func MaxReconcilesPerStore(concurrency int) int {
	return max(1, min(concurrency-1, (3*concurrency+3)/4))
}

// LockedRecheck is the least time before a deletion blocked by locked object versions
// looks at them again, whatever the sync interval (it looks again when the first of
// them unlocks, or after the sync interval when no date is known): a blocked claim
// costs its store a pass a minute at most, from the budget every tenant shares.
const LockedRecheck = time.Minute

// Defaults of the API: the CRDs default these fields to the same values, and the code
// falls back to them for objects that did not pass through the API server's defaulting.
const (
	// ProbeTimeout is spec.probe.timeout of a StorageBucket.
	ProbeTimeout = 5 * time.Second
	// StoreHealthCheckInterval is spec.healthCheck.interval of an ObjectStore.
	StoreHealthCheckInterval = 30 * time.Second
	// StoreRegion is spec.region of an ObjectStore: the region requests are signed for.
	StoreRegion = "us-east-1"
	// ReleaseBlockedDeletionAfter is spec.guardrails.objectLock.releaseBlockedDeletionAfter
	// of an ObjectStore: how long a deletion blocked by locked object versions waits.
	ReleaseBlockedDeletionAfter = 24 * time.Hour
	// WebIdentityMaxSessionDuration is spec.accessProvider.webIdentity.maxSessionDuration
	// of an ObjectStore: the longest session a keyless access's role grants.
	WebIdentityMaxSessionDuration = time.Hour
)

// Keyless access: how the operator keeps a store's registration of the cluster's
// issuer.
const (
	// WebIdentityRecheck is how often a store's OIDC provider is registered again
	// (thumbprints recomputed, audiences and thumbprints brought back) when nothing
	// in its spec changed: a key set's host may change its certificate, and someone
	// may change the provider.
	WebIdentityRecheck = 10 * time.Minute
	// WebIdentityRetry is how soon a failed registration is tried again.
	WebIdentityRetry = 30 * time.Second
	// IssuerFetchTimeout bounds the lookup of an issuer's thumbprint (its discovery
	// document and key set).
	IssuerFetchTimeout = 10 * time.Second
)

// StoreHealthCheckTimeout bounds one ObjectStore health check (the S3 request timeout
// applies too).
const StoreHealthCheckTimeout = 10 * time.Second

// StoreLeaseGrace is how much longer than its store's health-check interval a store's
// health-check Lease lasts (with --shard-count above 1). The holder renews it at every
// check, one interval plus one reconcile apart: the grace covers a check that runs to
// its timeout, the API calls around it and clocks a few seconds apart, so a healthy
// holder keeps the Lease and a dead one is replaced within interval + grace.
const StoreLeaseGrace = StoreHealthCheckTimeout + 20*time.Second

// MinStoreCheckGap bounds health checks of one store, however many probes ask for one:
// while a store is down the operator sends it about one request per second at most. A
// shard that lost a race for a store's Lease looks again after it too.
const MinStoreCheckGap = time.Second

// RetirementCountGap bounds how often a retiring store's buckets are counted into its
// status.retirement (a few lists of StorageBuckets from the API server), however many
// of its claims change at once.
const RetirementCountGap = 2 * time.Second

// LeaseCallTimeout bounds each API call for a store's health-check Lease.
const LeaseCallTimeout = 10 * time.Second

// Defaults of a mover (internal/mover), the data plane of moving a bucket to another
// store: what one mover process may use unless the move's spec says otherwise.
const (
	// MoverConcurrency is how many transfers (objects, or parts of large ones) one
	// mover runs at once.
	MoverConcurrency = 8
	// MoverSmallObject is the largest object a mover reads into memory before writing
	// it; larger ones are streamed. With MoverConcurrency it bounds the object bytes a
	// mover holds: 8 MiB.
	MoverSmallObject = 1 << 20
	// MoverPartSize is the part size of the objects a mover lays out in parts itself.
	MoverPartSize = 16 << 20
	// MoverStreamLimit is the largest single-part object a mover copies as one
	// streamed write; larger ones are copied in parts so that a killed mover resumes
	// them from their last part.
	MoverStreamLimit = 256 << 20
	// MoverCheckpointInterval is how often a mover writes its progress.
	MoverCheckpointInterval = 5 * time.Second
	// MoverMaxFailures ends a pass once this many keys could not be copied.
	MoverMaxFailures = 1000
	// MoverMinMemory is the least memory cap a store may set on a mover pod
	// (guardrails.moves.maxMoverMemory): a mover holds about mover.MemoryBound (42 MiB
	// with the limits above) besides its runtime.
	MoverMinMemory = 64 << 20
)

// Defaults of moving a bucket between stores (spec.move), the orchestration around the
// mover.
const (
	// MoveShards is how many shards a move's plan cuts the source into: passes run
	// them side by side. A small bucket gets fewer (the plan cannot cut it finer).
	MoveShards = 2
	// MoveCutoverChanges: a copy pass that copied or deleted at most this many objects
	// is followed by the cutover, whose final pass copies the rest with writes stopped;
	// the fewer, the shorter the write pause.
	MoveCutoverChanges = 100
	// MoveMaxCatchUpPasses bounds the passes before the cutover: a bucket written
	// faster than it is copied is cut over anyway after this many, with a longer pause.
	MoveMaxCatchUpPasses = 20
	// MoveMaxFinalPasses bounds the unverified final passes of one cutover: then the
	// source takes writes again and the move reports what stays unequal.
	MoveMaxFinalPasses = 3
	// MoveCutoverRetry is how long a move whose final passes never found both sides
	// equal (writes went on under the freeze) copies without freezing before it cuts
	// over again; each such cutover doubles the wait, up to MoveCutoverRetryMax.
	MoveCutoverRetry    = time.Minute
	MoveCutoverRetryMax = 30 * time.Minute
	// MovePollInterval is how often a running pass's checkpoints are read for status.
	MovePollInterval = 2 * time.Second
	// MoveShareOfBudget: the movers of every move into or out of a store together
	// spend at most this share of the store's request budget (spec.requestsPerSecond),
	// each running move MoveShareOfBudget/maxConcurrent of it, and the operator's own
	// requests to the store give up what the running moves take, so the store's other
	// buckets keep converging while they run and the two never add up to more than
	// the budget.
	MoveShareOfBudget = 0.5
	// MoveMaxConcurrentPerStore is an ObjectStore's guardrails.moves.maxConcurrent
	// when unset: the most moves into or out of the store that run at once.
	MoveMaxConcurrentPerStore = 2
	// MaxConcurrentMoves is --max-concurrent-moves: the most moves one operator runs
	// at once, whatever their stores.
	MaxConcurrentMoves = 4
	// MoveQueueRecheck is how often a queued move looks at its place in line when no
	// end of another move woke it.
	MoveQueueRecheck = 30 * time.Second
	// CancelledMoveTargetKeep is how long a move cancelled after its plan keeps its
	// target bucket and checkpoints: asked again meanwhile, it resumes without copying
	// again what it verified.
	CancelledMoveTargetKeep = 10 * time.Minute
	// MoveTargetSettle is how long after the target bucket of a cancelled move was
	// deleted it must stay gone: a write the stopped mover had sent may still be
	// carried out, and some stores (SeaweedFS) make the bucket again for it.
	MoveTargetSettle = 5 * time.Second
)
