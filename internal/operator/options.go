package operator

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// Options configure one operator instance. Zero values mean the defaults of package
// defaults, which the flags of cmd/bucketkeeper show too.
type Options struct {
	// MetricsBindAddress serves Prometheus metrics; "0" turns the endpoint off.
	MetricsBindAddress string
	// MetricsSecure serves metrics over HTTPS and lets through only callers whose
	// bearer token the API server authenticates (TokenReview) and authorizes for
	// GET /metrics (SubjectAccessReview).
	MetricsSecure bool
	// HealthProbeBindAddress serves /healthz and /readyz; "0" turns them off.
	HealthProbeBindAddress string

	LeaderElection          bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election (default
	// 15s/10s/2s, controller-runtime's own).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// Concurrency is the number of StorageBuckets reconciled at once, and of
	// BucketAccesses (default 4).
	Concurrency int
	// SyncInterval is how often each bucket's configuration is re-read to correct
	// drift made outside the operator (default 10m).
	SyncInterval time.Duration
	// UsageInterval is the least time between two reads of a bucket's usage from its
	// store's admin API (default 5m).
	UsageInterval time.Duration
	// StatusHeartbeat bounds how often a timestamp alone is rewritten in status
	// (default 5m).
	StatusHeartbeat time.Duration

	// S3RequestTimeout bounds every S3 call, SDK retries included (default 30s); a
	// probe's shorter timeout still applies to its own calls.
	S3RequestTimeout time.Duration
	// ReconcileTimeout bounds each reconcile of either controller (default 2m).
	ReconcileTimeout time.Duration
	// CreateSettleTime is how long after a CreateBucket went unanswered the store may
	// still carry it out (default 30s): a StorageBucket deleted meanwhile that finds no
	// bucket waits until then before it concludes there is nothing to delete.
	CreateSettleTime time.Duration
	// MaxReconcilesPerStore caps the StorageBucket reconciles one store may have in
	// flight while there are two or more stores, so a store that hangs cannot take
	// every worker. Default: three quarters of Concurrency and always at least one
	// worker less, so other stores keep at least one (with Concurrency 1 there is
	// nothing to share: 1). With a single store the cap is Concurrency-1 (at least 1)
	// whatever this says: one worker stays free for a store added next.
	MaxReconcilesPerStore int

	// DefaultProbeInterval applies to StorageBuckets without spec.probe.interval
	// (default 1m).
	DefaultProbeInterval time.Duration
	// MinProbeRequestInterval bounds on-demand probes (annotation or webhook) to one
	// per bucket per interval; requests inside it are served together at its end
	// (default 10s).
	MinProbeRequestInterval time.Duration
	// WatchNamespace limits the namespaces whose StorageBuckets and Secrets are
	// watched (empty: all).
	WatchNamespace string

	// WatchLabelSelector limits the StorageBuckets and BucketAccesses this instance
	// sees, for sharding buckets across several operator deployments (empty: all).
	// An access belongs to the shard of its buckets, so it carries the same labels.
	WatchLabelSelector string
	// ShardCount is the number of operator deployments splitting the buckets with
	// WatchLabelSelector (default 1). Every shard reconciles every ObjectStore, so with
	// more than one each spends 1/ShardCount of every store's request budget, and the
	// shards elect through a Lease per store (in LeaderElectionNamespace, held under
	// LeaderElectionID) the one that health-checks it. Give every shard the same value.
	ShardCount int

	// DisableAvailabilityMetric drops the per-bucket series
	// (bucketkeeper_bucket_available, bucketkeeper_bucket_last_successful_probe_timestamp_seconds
	// and bucketkeeper_bucket_probe_interval_seconds), for installs with very many buckets.
	DisableAvailabilityMetric bool

	// ReceiverBindAddress, when set, serves the authenticated probe-request webhook
	// there. Its keys are namespaced: Secrets in ReceiverKeysNamespace labelled
	// bucketkeeper.io/secret-role=receiver-key, each reaching the namespaces it names.
	ReceiverBindAddress string
	// ReceiverKeysNamespace is the one namespace whose labelled Secrets are receiver
	// keys (default: the operator pod's namespace). Only the platform team should be
	// able to write Secrets there: whoever can, can make a key for any namespace.
	// Outside a cluster it must be named, unless ReceiverClusterWideSecret is the only
	// key wanted.
	ReceiverKeysNamespace string
	// ReceiverClusterWideSecret, if set, is a key for requests that name none, which
	// reaches every namespace: its holder may probe, and learn which claims use a
	// bucket name, in all of them. Only for a platform team that chose so (the
	// binary's --receiver-cluster-wide-key).
	ReceiverClusterWideSecret []byte
	// ReceiverTLSCertFile and ReceiverTLSKeyFile, both or neither, make the receiver
	// serve HTTPS with that PEM certificate and key.
	ReceiverTLSCertFile, ReceiverTLSKeyFile string
	// ReceiverMaxConnections caps the receiver's open connections and with them the
	// request bodies it holds at once, at most 64 KiB each (default 64: 4 MiB).
	ReceiverMaxConnections int

	// Mover is how moves between stores (spec.move) copy objects: MoverInProcess runs
	// the mover in goroutines of the operator, MoverNone refuses moves. Empty means
	// in-process where MoverNamespace can be found, else none.
	Mover string
	// MoverNamespace holds the moves' checkpoints, ConfigMaps no tenant can write,
	// and with MoverJob their Jobs (default: LeaderElectionNamespace, else the pod's
	// own namespace).
	MoverNamespace string
	// MoverImage, MoverServiceAccount, MoverParallelism, MoverCPU and MoverMemory
	// shape the Jobs of MoverJob: the operator's own image, the movers'
	// ServiceAccount (ConfigMaps of MoverNamespace, nothing else), the most pods of
	// one pass at once, and each pod's CPU and memory (requests equal to limits).
	MoverImage, MoverServiceAccount string
	MoverParallelism                int
	MoverCPU, MoverMemory           string
	// MaxConcurrentMoves is the most moves this instance runs at once, whatever their
	// stores (default 4); each store bounds its own with guardrails.moves.maxConcurrent.
	// A move beyond either waits in phase Queued.
	MaxConcurrentMoves int
	// CancelledMoveKeep is how long a move cancelled after its plan keeps its target
	// bucket and checkpoints, to resume if asked again (default 10m). Tests shorten it.
	CancelledMoveKeep time.Duration

	// ProbeStrategy is "scheduler" (the default and the only one of a default build).
	// The benchmark's build (tag benchbaseline) adds "global-ticker": a single global
	// ticker enqueueing every bucket and writing lastProbeTime on every probe, the
	// baseline the scheduler is measured against.
	ProbeStrategy string

	// AccessKeyGrace is how long a rotated-out key stays valid (default 10m).
	AccessKeyGrace time.Duration
	// AccessCollectInterval is how often each IAM store's users are listed to delete
	// those no BucketAccess grants any more (default 5m): the longest a key outlives
	// its grant when its access went without the operator's finalizer.
	AccessCollectInterval time.Duration
	// IAMFactory builds IAM drivers (default iam.New).
	IAMFactory iam.Factory
	// IssuerHTTPClient reads a ServiceAccount token issuer's discovery document and
	// key set, to compute the thumbprint of an ObjectStore's webIdentity that gives
	// none (default: the system's roots). Tests give one that reaches their issuer.
	IssuerHTTPClient *http.Client
	// IAMObserver, if set, sees every IAM request besides the metrics.
	IAMObserver func(store, operation string, httpStatus int, err error)

	// PprofBindAddress serves net/http/pprof there, for profiling; empty disables it.
	PprofBindAddress string

	// ClusterID is written into every bucket's ownership tags (bucketkeeper.io/cluster)
	// and every IAM user name, so that clusters sharing a store never touch each
	// other's buckets or users. Empty means the UID of the kube-system namespace,
	// which is stable for a cluster's lifetime and differs between clusters.
	ClusterID string

	// S3Factory builds store clients (default s3.New). Tests wrap it.
	S3Factory s3.Factory
	// S3Observer, if set, sees every S3 request besides the metrics.
	S3Observer func(store, operation string, httpStatus int, err error)
	// Clock drives everything time-based (default: the real clock).
	Clock clock.WithTicker
}

// setDefaults is the one defaulting step of Options: every unset field takes its value
// from package defaults.
func (o *Options) setDefaults() {
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = defaults.LeaderElectionID
	}
	durations := []struct {
		field *time.Duration
		value time.Duration
	}{
		{&o.LeaseDuration, defaults.LeaseDuration},
		{&o.RenewDeadline, defaults.RenewDeadline},
		{&o.RetryPeriod, defaults.RetryPeriod},
		{&o.SyncInterval, defaults.SyncInterval},
		{&o.UsageInterval, defaults.UsageInterval},
		{&o.StatusHeartbeat, defaults.StatusHeartbeat},
		{&o.S3RequestTimeout, defaults.S3RequestTimeout},
		{&o.ReconcileTimeout, defaults.ReconcileTimeout},
		{&o.CreateSettleTime, defaults.CreateSettleTime},
		{&o.DefaultProbeInterval, defaults.ProbeInterval},
		{&o.MinProbeRequestInterval, defaults.MinProbeRequestInterval},
		{&o.AccessKeyGrace, defaults.AccessKeyGrace},
		{&o.AccessCollectInterval, defaults.AccessCollectInterval},
		{&o.CancelledMoveKeep, defaults.CancelledMoveTargetKeep},
	}
	for _, d := range durations {
		if *d.field <= 0 {
			*d.field = d.value
		}
	}
	if o.ShardCount == 0 {
		o.ShardCount = defaults.ShardCount
	}
	if o.Concurrency <= 0 {
		o.Concurrency = defaults.Concurrency
	}
	if o.MaxReconcilesPerStore <= 0 {
		o.MaxReconcilesPerStore = defaults.MaxReconcilesPerStore(o.Concurrency)
	}
	if o.MaxConcurrentMoves <= 0 {
		o.MaxConcurrentMoves = defaults.MaxConcurrentMoves
	}
	if o.ReceiverMaxConnections <= 0 {
		o.ReceiverMaxConnections = defaults.ReceiverMaxConnections
	}
	if o.S3Factory == nil {
		o.S3Factory = s3.New
	}
	if o.IAMFactory == nil {
		o.IAMFactory = iam.New
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

// validate refuses option values that cannot work, after setDefaults.
func (o *Options) validate() error {
	switch o.Mover {
	case "", MoverInProcess, MoverNone:
	case MoverJob:
		if o.MoverImage == "" || o.MoverServiceAccount == "" {
			return errors.New("--mover=job needs --mover-image and --mover-service-account")
		}
		if _, err := o.moverResources(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--mover must be %s, %s or %s, not %q", MoverJob, MoverInProcess, MoverNone, o.Mover)
	}
	if o.ShardCount < 1 {
		return fmt.Errorf("--shard-count must be at least 1, not %d", o.ShardCount)
	}
	if o.ShardCount > 1 && o.WatchLabelSelector == "" {
		// A shard without a selector serves every bucket, alongside the shards that
		// serve their part of them: each bucket would be served twice.
		return errors.New("--shard-count above 1 needs --watch-label-selector: each shard serves the buckets its selector matches")
	}
	return nil
}

// inClusterNamespaceFile names the namespace of the pod the operator runs in.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// receiverKeysNamespace is where the receiver's namespaced keys live: the one named, or
// the pod's own. Outside a cluster with only a cluster-wide key it is "": no
// namespaced keys.
func (o *Options) receiverKeysNamespace() (string, error) {
	if o.ReceiverKeysNamespace != "" {
		return o.ReceiverKeysNamespace, nil
	}
	data, err := os.ReadFile(inClusterNamespaceFile)
	if err == nil {
		return strings.TrimSpace(string(data)), nil
	}
	if len(o.ReceiverClusterWideSecret) > 0 {
		return "", nil
	}
	return "", fmt.Errorf("the probe receiver reads its keys from the operator's namespace: outside a cluster, name it with --receiver-keys-namespace (%w)", err)
}

// leaseNamespace is where the stores' health-check Leases live: the leader-election
// namespace, which defaults to the pod's own (as controller-runtime's does).
func (o *Options) leaseNamespace() (string, error) {
	if o.LeaderElectionNamespace != "" {
		return o.LeaderElectionNamespace, nil
	}
	data, err := os.ReadFile(inClusterNamespaceFile)
	if err != nil {
		return "", fmt.Errorf("--shard-count above 1 keeps a Lease per store in the operator's namespace: outside a cluster, name it with --leader-election-namespace (%w)", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// The values of Options.Mover.
const (
	MoverJob       = "job"
	MoverInProcess = "in-process"
	MoverNone      = "none"
)

// moverResources are a mover pod's requests and limits, equal: a mover's memory is
// bounded by design (internal/mover), so it needs no room to burst.
func (o *Options) moverResources() (corev1.ResourceRequirements, error) {
	list := corev1.ResourceList{}
	for name, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: o.MoverCPU, corev1.ResourceMemory: o.MoverMemory} {
		if v == "" {
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return corev1.ResourceRequirements{}, fmt.Errorf("--mover-%s %q: %w", name, v, err)
		}
		list[name] = q
	}
	return corev1.ResourceRequirements{Requests: list, Limits: list}, nil
}

// moverNamespace is where moves keep their checkpoints: the one named, the
// leader-election namespace, or the pod's own.
func (o *Options) moverNamespace() (string, error) {
	if o.MoverNamespace != "" {
		return o.MoverNamespace, nil
	}
	ns, err := o.leaseNamespace()
	if err != nil {
		return "", fmt.Errorf("moves keep their checkpoints in the operator's namespace: outside a cluster, name it with --mover-namespace (%w)", errors.Unwrap(err))
	}
	return ns, nil
}
