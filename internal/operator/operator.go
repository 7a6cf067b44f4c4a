// Package operator wires bucketkeeper's manager: options in, a manager with every
// controller, index and metric registered out. The production binary, the tests and
// the benchmarks all build their manager here, so they run the same operator.
package operator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/controller"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/metrics"
	"github.com/bucketkeeper/bucketkeeper/internal/probe"
	"github.com/bucketkeeper/bucketkeeper/internal/receiver"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// Options configure one operator instance. Zero values mean the documented defaults.
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
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election (zero:
	// controller-runtime's 15s/10s/2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// Concurrency is the number of StorageBuckets reconciled at once.
	Concurrency int
	// SyncInterval is how often each bucket's configuration is re-read to correct
	// drift made outside the operator (default 10m).
	SyncInterval time.Duration
	// StatusHeartbeat bounds how often a timestamp alone is rewritten in status
	// (default 5m).
	StatusHeartbeat time.Duration

	// S3RequestTimeout bounds every S3 call, SDK retries included (default 30s); a
	// probe's shorter timeout still applies to its own calls.
	S3RequestTimeout time.Duration
	// ReconcileTimeout bounds each reconcile of either controller (default 2m).
	ReconcileTimeout time.Duration
	// MaxReconcilesPerStore caps the StorageBucket reconciles one store may have in
	// flight, so a store that hangs cannot take every worker. Default: three quarters
	// of Concurrency and always at least one worker less, so other stores keep at
	// least one (with Concurrency 1 there is nothing to share: 1).
	MaxReconcilesPerStore int

	// DefaultProbeInterval applies to StorageBuckets without spec.probe.interval.
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

	// DisableAvailabilityMetric drops the per-bucket series
	// (bucketkeeper_bucket_available, bucketkeeper_bucket_last_successful_probe_timestamp_seconds
	// and bucketkeeper_bucket_probe_interval_seconds), for installs with very many buckets.
	DisableAvailabilityMetric bool

	// ReceiverBindAddress, when set, serves the authenticated probe-request webhook
	// there, signed with ReceiverSecret.
	ReceiverBindAddress string
	ReceiverSecret      []byte
	// ReceiverTLSCertFile and ReceiverTLSKeyFile, both or neither, make the receiver
	// serve HTTPS with that PEM certificate and key.
	ReceiverTLSCertFile, ReceiverTLSKeyFile string

	// ProbeStrategy is "scheduler" (default) or "global-ticker": the seeds' design of
	// one ticker enqueueing every bucket and writing lastProbeTime on every probe, kept
	// only so the benchmark can measure both in the same binary.
	ProbeStrategy string

	// AccessKeyGrace is how long a rotated-out key stays valid (default 10m).
	AccessKeyGrace time.Duration
	// IAMFactory builds IAM drivers (default iam.New).
	IAMFactory iam.Factory

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

func (o *Options) defaults() {
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = "bucketkeeper.io"
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = 10 * time.Minute
	}
	if o.StatusHeartbeat <= 0 {
		o.StatusHeartbeat = 5 * time.Minute
	}
	if o.MinProbeRequestInterval <= 0 {
		o.MinProbeRequestInterval = 10 * time.Second
	}
	if o.S3RequestTimeout <= 0 {
		o.S3RequestTimeout = 30 * time.Second
	}
	if o.ReconcileTimeout <= 0 {
		o.ReconcileTimeout = 2 * time.Minute
	}
	if o.MaxReconcilesPerStore <= 0 {
		o.MaxReconcilesPerStore = max(1, min(o.Concurrency-1, (3*o.Concurrency+3)/4))
	}
	if o.S3Factory == nil {
		o.S3Factory = s3.New
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.AccessKeyGrace <= 0 {
		o.AccessKeyGrace = controller.DefaultKeyGrace
	}
	if o.IAMFactory == nil {
		o.IAMFactory = iam.New
	}
}

// Scheme returns a scheme with the Kubernetes core types and bucketkeeper's API.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := bkv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// New builds a manager running both controllers. Start it with mgr.Start(ctx).
func New(cfg *rest.Config, opts Options) (manager.Manager, error) {
	opts.defaults()
	metrics.Register()
	if opts.ClusterID == "" {
		id, err := DefaultClusterID(cfg)
		if err != nil {
			return nil, err
		}
		opts.ClusterID = id
	}

	// Only Secrets the operator labels are cached: the connection Secrets it writes and
	// the credentials Secrets stores name. Never every Secret in the cluster.
	secretRole, err := labels.NewRequirement(controller.LabelSecretRole, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	secrets := cache.ByObject{Label: labels.NewSelector().Add(*secretRole)}
	if opts.WatchNamespace != "" {
		// Stores are cluster-scoped and name their credentials Secrets in any namespace
		// (usually the platform team's, not the watched one): those are cached in every
		// namespace, everything else the operator labels only in the watched one.
		// Without this the cache answers "unknown namespace" and the store never
		// gets a client.
		secrets.Namespaces = map[string]cache.Config{
			opts.WatchNamespace: {LabelSelector: labels.NewSelector().Add(*secretRole)},
			cache.AllNamespaces: {LabelSelector: labels.SelectorFromSet(labels.Set{controller.LabelSecretRole: controller.SecretRoleCredentials})},
		}
	}
	byObject := map[client.Object]cache.ByObject{&corev1.Secret{}: secrets}
	if opts.WatchLabelSelector != "" {
		shard, err := labels.Parse(opts.WatchLabelSelector)
		if err != nil {
			return nil, fmt.Errorf("invalid watch label selector %q: %w", opts.WatchLabelSelector, err)
		}
		byObject[&bkv1.StorageBucket{}] = cache.ByObject{Label: shard}
		// A shard must not see the accesses of another shard's buckets: to it those
		// buckets do not exist, so it would revoke keys the other shard issues.
		byObject[&bkv1.BucketAccess{}] = cache.ByObject{Label: shard}
	}
	// managedFields are often larger than the rest of an object and the operator
	// never reads them: dropping them from the cache roughly halves its memory.
	cacheOpts := cache.Options{ByObject: byObject, DefaultTransform: cache.TransformStripManagedFields()}
	if opts.WatchNamespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{opts.WatchNamespace: {}}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  Scheme(),
		Metrics:                 metricsOptions(opts),
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        opts.LeaderElectionID,
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// Leader election is released on a clean stop, so a rolling update hands
		// over at once instead of after the lease expires.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 nonZero(opts.LeaseDuration),
		RenewDeadline:                 nonZero(opts.RenewDeadline),
		RetryPeriod:                   nonZero(opts.RetryPeriod),
		Cache:                         cacheOpts,
		PprofBindAddress:              opts.PprofBindAddress,
		// Tests and the dev binary run several managers in one process; controller
		// names then repeat by design.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}

	observe := metrics.ObserveS3
	if opts.S3Observer != nil {
		extra := opts.S3Observer
		observe = func(store, op string, status int, err error) {
			metrics.ObserveS3(store, op, status, err)
			extra(store, op, status, err)
		}
	}
	stores := &controller.StoreRegistry{
		Client:                mgr.GetClient(),
		APIReader:             mgr.GetAPIReader(),
		Factory:               opts.S3Factory,
		Observer:              observe,
		RequestTimeout:        opts.S3RequestTimeout,
		MaxReconcilesPerStore: opts.MaxReconcilesPerStore,
	}

	access := &controller.AccessProviders{Stores: stores, Factory: opts.IAMFactory}

	ctx := context.Background()
	if err := controller.SetupIndexes(ctx, mgr); err != nil {
		return nil, fmt.Errorf("registering indexes: %w", err)
	}
	if err := controller.SetupBucketAccessIndexes(ctx, mgr); err != nil {
		return nil, fmt.Errorf("registering indexes: %w", err)
	}
	scheduler := probe.NewScheduler(opts.Clock, probe.Options{
		OnSend: func(_ types.NamespacedName, lag time.Duration) { metrics.ProbeScheduleLag.Observe(lag.Seconds()) },
	})
	prober := &controller.Prober{
		Scheduler:          scheduler,
		Clock:              opts.Clock,
		Heartbeat:          opts.StatusHeartbeat,
		DefaultInterval:    opts.DefaultProbeInterval,
		MinRequestInterval: opts.MinProbeRequestInterval,
		Observe: func(store string, mode bkv1.ProbeMode, reason string, latency time.Duration) {
			metrics.ObserveProbe(store, string(mode), reason, latency)
		},
	}
	probeEvents := scheduler.Source()
	var probeRunnable manager.Runnable = scheduler
	switch opts.ProbeStrategy {
	case "", "scheduler":
	case "global-ticker":
		interval := opts.DefaultProbeInterval
		if interval <= 0 {
			interval = time.Minute
		}
		ticker := probe.NewGlobalTicker(opts.Clock, interval, func(ctx context.Context) ([]client.Object, error) {
			list := &bkv1.StorageBucketList{}
			if err := mgr.GetClient().List(ctx, list); err != nil {
				return nil, err
			}
			out := make([]client.Object, 0, len(list.Items))
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			return out, nil
		})
		prober.Scheduler, prober.Naive = nil, true
		probeEvents, probeRunnable = ticker.Source(), ticker
	default:
		return nil, fmt.Errorf("unknown probe strategy %q (want scheduler or global-ticker)", opts.ProbeStrategy)
	}
	if err := mgr.Add(probeRunnable); err != nil {
		return nil, err
	}
	if !opts.DisableAvailabilityMetric {
		prober.Available = func(key types.NamespacedName, available *bool, forget bool) {
			metrics.SetAvailable(key.Namespace, key.Name, available, forget)
		}
		prober.Succeeded = func(key types.NamespacedName, at time.Time, interval time.Duration) {
			metrics.SetProbeSucceeded(key.Namespace, key.Name, at, interval)
		}
	}

	if err := (&controller.ObjectStoreReconciler{
		Client:           mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		Recorder:         mgr.GetEventRecorder("bucketkeeper-objectstore"),
		Stores:           stores,
		Clock:            opts.Clock,
		Heartbeat:        opts.StatusHeartbeat,
		OnStatusWrite:    metrics.ObserveStatusWrite,
		OnHealth:         metrics.SetStoreReady,
		Budget:           scheduler.SetBudget,
		Access:           access,
		ReconcileTimeout: opts.ReconcileTimeout,
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the ObjectStore controller: %w", err)
	}
	if err := (&controller.BucketAccessReconciler{
		Client:        mgr.GetClient(),
		Recorder:      mgr.GetEventRecorder("bucketkeeper-bucketaccess"),
		Stores:        stores,
		Access:        access,
		Clock:         opts.Clock,
		ClusterID:     opts.ClusterID,
		KeyGrace:      opts.AccessKeyGrace,
		SyncInterval:  opts.SyncInterval,
		OnStatusWrite: metrics.ObserveStatusWrite,
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the BucketAccess controller: %w", err)
	}
	if err := (&controller.StorageBucketReconciler{
		Client:           mgr.GetClient(),
		Recorder:         mgr.GetEventRecorder("bucketkeeper-storagebucket"),
		Stores:           stores,
		Clock:            opts.Clock,
		SyncInterval:     opts.SyncInterval,
		ClusterID:        opts.ClusterID,
		OnStatusWrite:    metrics.ObserveStatusWrite,
		Prober:           prober,
		ProbeEvents:      probeEvents,
		ReconcileTimeout: opts.ReconcileTimeout,
	}).SetupWithManager(mgr, opts.Concurrency); err != nil {
		return nil, fmt.Errorf("setting up the StorageBucket controller: %w", err)
	}
	if opts.ReceiverBindAddress != "" {
		rcv, err := receiver.New(receiver.Options{
			BindAddress: opts.ReceiverBindAddress,
			Secret:      opts.ReceiverSecret,
			TLSCertFile: opts.ReceiverTLSCertFile,
			TLSKeyFile:  opts.ReceiverTLSKeyFile,
			Requester:   &controller.ProbeRequester{Client: mgr.GetClient(), Clock: opts.Clock},
			Clock:       opts.Clock,
			Log:         ctrl.Log.WithName("receiver"),
		})
		if err != nil {
			return nil, fmt.Errorf("setting up the probe receiver: %w", err)
		}
		if err := mgr.Add(rcv); err != nil {
			return nil, err
		}
	}

	if opts.HealthProbeBindAddress != "0" && opts.HealthProbeBindAddress != "" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// DefaultClusterID is the UID of the kube-system namespace: every cluster has one, it
// never changes while the cluster lives, and two clusters never share it.
func DefaultClusterID(cfg *rest.Config) (string, error) {
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, ns); err != nil {
		return "", fmt.Errorf("reading the kube-system namespace for the default --cluster-id: %w", err)
	}
	return string(ns.UID), nil
}

// metricsOptions serves metrics on opts.MetricsBindAddress; with MetricsSecure over
// HTTPS (a self-signed certificate) behind controller-runtime's authn/authz filter.
func metricsOptions(opts Options) metricsserver.Options {
	o := metricsserver.Options{BindAddress: opts.MetricsBindAddress}
	if opts.MetricsSecure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}

func nonZero(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}
