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
	"github.com/bucketkeeper/bucketkeeper/internal/controller/bucketaccess"
	"github.com/bucketkeeper/bucketkeeper/internal/controller/objectstore"
	"github.com/bucketkeeper/bucketkeeper/internal/controller/storagebucket"
	"github.com/bucketkeeper/bucketkeeper/internal/metrics"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/probe"
	"github.com/bucketkeeper/bucketkeeper/internal/quota"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

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

// New builds a manager running every controller. Start it with mgr.Start(ctx).
func New(cfg *rest.Config, opts Options) (manager.Manager, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	metrics.Register()
	if opts.ClusterID == "" {
		id, err := DefaultClusterID(cfg)
		if err != nil {
			return nil, err
		}
		opts.ClusterID = id
	}
	mgr, err := newManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := reconcile.SetupIndexes(context.Background(), mgr, opts.ReceiverBindAddress != ""); err != nil {
		return nil, fmt.Errorf("registering indexes: %w", err)
	}
	if err := bucketaccess.SetupIndexes(context.Background(), mgr); err != nil {
		return nil, fmt.Errorf("registering indexes: %w", err)
	}
	registry := &stores.Registry{
		Client:                mgr.GetClient(),
		APIReader:             mgr.GetAPIReader(),
		Factory:               opts.S3Factory,
		Observer:              s3Observer(opts),
		RequestTimeout:        opts.S3RequestTimeout,
		MaxReconcilesPerStore: opts.MaxReconcilesPerStore,
		Shards:                opts.ShardCount,
	}
	probing, err := setupProbing(mgr, opts)
	if err != nil {
		return nil, err
	}
	if err := setupControllers(mgr, opts, registry, probing); err != nil {
		return nil, err
	}
	if err := setupReceiver(mgr, opts); err != nil {
		return nil, err
	}
	if err := setupHealthChecks(mgr, opts); err != nil {
		return nil, err
	}
	return mgr, nil
}

// newManager creates the manager with its cache limited to what the operator reads.
func newManager(cfg *rest.Config, opts Options) (manager.Manager, error) {
	cacheOpts, err := cacheOptions(opts)
	if err != nil {
		return nil, err
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
		LeaseDuration:                 &opts.LeaseDuration,
		RenewDeadline:                 &opts.RenewDeadline,
		RetryPeriod:                   &opts.RetryPeriod,
		Cache:                         cacheOpts,
		PprofBindAddress:              opts.PprofBindAddress,
		// Tests and the dev binary run several managers in one process; controller
		// names then repeat by design.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	return mgr, nil
}

// cacheOptions limits the cache: only Secrets with one of the operator's role labels
// are cached (the connection and access Secrets it writes and the credentials Secrets
// stores name), never every Secret in the cluster, and each as a bounded summary
// without its data (reconcile.TransformSecret), since a tenant can label its own
// Secrets so; with a namespace or label selector only those objects.
func cacheOptions(opts Options) (cache.Options, error) {
	secretRole, err := labels.NewRequirement(bkv1.LabelSecretRole, selection.In,
		[]string{bkv1.SecretRoleConnection, bkv1.SecretRoleCredentials, bkv1.SecretRoleAccess})
	if err != nil {
		return cache.Options{}, err
	}
	secrets := cache.ByObject{Label: labels.NewSelector().Add(*secretRole), Transform: reconcile.TransformSecret()}
	if opts.WatchNamespace != "" {
		// Stores are cluster-scoped and name their credentials Secrets in any namespace
		// (usually the platform team's, not the watched one): those are cached in every
		// namespace, everything else the operator labels only in the watched one.
		// Without this the cache answers "unknown namespace" and the store never
		// gets a client.
		secrets.Namespaces = map[string]cache.Config{
			opts.WatchNamespace: {LabelSelector: labels.NewSelector().Add(*secretRole)},
			cache.AllNamespaces: {LabelSelector: labels.SelectorFromSet(labels.Set{bkv1.LabelSecretRole: bkv1.SecretRoleCredentials})},
		}
	}
	// ByObject is keyed by object pointer, not by kind: each kind gets exactly one
	// entry, built whole before it goes in. A second &StorageBucket{} key would be a
	// second entry for the same kind, and which one the cache applies would depend on
	// map order (a shard would then see every bucket now and then).
	buckets := cache.ByObject{Transform: reconcile.TransformStorageBucket()}
	var accesses *cache.ByObject
	if opts.WatchLabelSelector != "" {
		shard, err := labels.Parse(opts.WatchLabelSelector)
		if err != nil {
			return cache.Options{}, fmt.Errorf("invalid watch label selector %q: %w", opts.WatchLabelSelector, err)
		}
		buckets.Label = shard
		// A shard must not see the accesses of another shard's buckets: to it those
		// buckets do not exist, so it would revoke keys the other shard issues.
		accesses = &cache.ByObject{Label: shard}
	}
	byObject := map[client.Object]cache.ByObject{&corev1.Secret{}: secrets, &bkv1.StorageBucket{}: buckets}
	if accesses != nil {
		byObject[&bkv1.BucketAccess{}] = *accesses
	}
	// managedFields are often larger than the rest of an object and the operator
	// never reads them: dropping them from the cache roughly halves its memory.
	cacheOpts := cache.Options{ByObject: byObject, DefaultTransform: cache.TransformStripManagedFields()}
	if opts.WatchNamespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{opts.WatchNamespace: {}}
	}
	return cacheOpts, nil
}

// s3Observer feeds every S3 request to the metrics and to opts.S3Observer, if set.
func s3Observer(opts Options) func(store, op string, status int, err error) {
	return bothObservers(metrics.ObserveS3, opts.S3Observer)
}

// iamObserver feeds every IAM request to the metrics and to opts.IAMObserver, if set.
func iamObserver(opts Options) func(store, op string, status int, err error) {
	return bothObservers(metrics.ObserveIAM, opts.IAMObserver)
}

// bothObservers calls metric and then extra, if set, for every request.
func bothObservers(metric, extra func(store, op string, status int, err error)) func(store, op string, status int, err error) {
	if extra == nil {
		return metric
	}
	return func(store, op string, status int, err error) {
		metric(store, op, status, err)
		extra(store, op, status, err)
	}
}

// probing is what setupProbing hands the controllers: the prober, which holds the probe
// scheduler the StorageBucket controller runs, and the per-store request budget of the
// probes, which the ObjectStore controller sets from each store's spec.
type probing struct {
	prober *storagebucket.Prober
	budget func(store string, perSecond float64, burst int)
}

// probeStrategy replaces the probe scheduler; see Options.ProbeStrategy.
type probeStrategy func(mgr manager.Manager, opts Options, prober *storagebucket.Prober) storagebucket.ProbeScheduler

// probeStrategies are the strategies other than the scheduler: none in a default
// build, the benchmark's baseline in one with the benchbaseline tag.
var probeStrategies = map[string]probeStrategy{}

// setupProbing builds the prober and its probe scheduler (or the strategy opts asks
// for); the StorageBucket controller runs the scheduler (SetupWithManager).
func setupProbing(mgr manager.Manager, opts Options) (probing, error) {
	scheduler := probe.NewScheduler(opts.Clock, probe.Options{
		OnSend: func(_ types.NamespacedName, lag time.Duration) { metrics.ProbeScheduleLag.Observe(lag.Seconds()) },
	})
	prober := &storagebucket.Prober{
		Scheduler:          scheduler,
		Clock:              opts.Clock,
		Heartbeat:          opts.StatusHeartbeat,
		DefaultInterval:    opts.DefaultProbeInterval,
		MinRequestInterval: opts.MinProbeRequestInterval,
		UsageInterval:      opts.UsageInterval,
		Observe: func(store string, mode bkv1.ProbeMode, reason string, latency time.Duration) {
			metrics.ObserveProbe(store, string(mode), reason, latency)
		},
	}
	if !opts.DisableAvailabilityMetric {
		prober.Available = func(key types.NamespacedName, available *bool, forget bool) {
			metrics.SetAvailable(key.Namespace, key.Name, available, forget)
		}
		prober.Succeeded = func(key types.NamespacedName, at time.Time, interval time.Duration) {
			metrics.SetProbeSucceeded(key.Namespace, key.Name, at, interval)
		}
		prober.Usage = func(key types.NamespacedName, usage quota.Usage, limits quota.Limits) {
			metrics.SetUsage(key.Namespace, key.Name, usage.Bytes, usage.Objects, limits.MaxBytes, limits.MaxObjects)
		}
	}
	switch strategy, ok := probeStrategies[opts.ProbeStrategy]; {
	case opts.ProbeStrategy == "" || opts.ProbeStrategy == "scheduler":
	case ok:
		prober.Scheduler = strategy(mgr, opts, prober)
	default:
		return probing{}, fmt.Errorf("unknown probe strategy %q (want scheduler)", opts.ProbeStrategy)
	}
	return probing{prober: prober, budget: scheduler.SetBudget}, nil
}

// setupControllers registers the ObjectStore, BucketAccess and StorageBucket
// controllers.
func setupControllers(mgr manager.Manager, opts Options, registry *stores.Registry, p probing) error {
	access := &stores.AccessProviders{Stores: registry, Factory: opts.IAMFactory, Observer: iamObserver(opts)}
	leases, err := storeLeases(mgr, opts)
	if err != nil {
		return err
	}
	clusterKeys, err := clusterKeySet(mgr.GetConfig())
	if err != nil {
		return err
	}
	if err := (&objectstore.Reconciler{
		Client:           mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		Recorder:         mgr.GetEventRecorder("bucketkeeper-objectstore"),
		Stores:           registry,
		Clock:            opts.Clock,
		Heartbeat:        opts.StatusHeartbeat,
		OnStatusWrite:    metrics.ObserveStatusWrite,
		OnHealth:         metrics.SetStoreReady,
		OnRetirement:     metrics.SetStoreRetirement,
		Budget:           p.budget,
		Leases:           leases,
		Access:           access,
		ClusterID:        opts.ClusterID,
		IssuerHTTPClient: opts.IssuerHTTPClient,
		ClusterKeys:      clusterKeys,
		ReconcileTimeout: opts.ReconcileTimeout,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the ObjectStore controller: %w", err)
	}
	accesses := &bucketaccess.Reconciler{
		Client:        mgr.GetClient(),
		Recorder:      mgr.GetEventRecorder("bucketkeeper-bucketaccess"),
		Stores:        registry,
		Access:        access,
		Clock:         opts.Clock,
		ClusterID:     opts.ClusterID,
		KeyGrace:      opts.AccessKeyGrace,
		SyncInterval:  opts.SyncInterval,
		OnStatusWrite: metrics.ObserveStatusWrite,
		OnReady: func(key types.NamespacedName, ready *bool) {
			metrics.SetAccessReady(key.Namespace, key.Name, ready)
		},
	}
	if err := accesses.SetupWithManager(mgr, opts.Concurrency); err != nil {
		return fmt.Errorf("setting up the BucketAccess controller: %w", err)
	}
	if err := mgr.Add(&bucketaccess.Collector{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Access:    access,
		Recorder:  mgr.GetEventRecorder("bucketkeeper-access-collector"),
		Clock:     opts.Clock,
		ClusterID: opts.ClusterID,
		Interval:  opts.AccessCollectInterval,
		Leases:    leases,
		OnRevoked: accesses.Forget,
		OnPass:    metrics.ObserveCollectorPass,
	}); err != nil {
		return fmt.Errorf("setting up the access collector: %w", err)
	}
	movers, err := setupMover(mgr, opts)
	if err != nil {
		return err
	}
	buckets := &storagebucket.Reconciler{
		Mover:  movers.runner,
		Access: access,
		OnMoveProgress: func(ns, name string, m *bkv1.MoveStatus) {
			metrics.SetMoveProgress(ns, name, m.CopiedBytes, m.CopiedObjects, m.ObjectsLeft)
		},
		OnMoveEnd:          metrics.EndMove,
		MaxConcurrentMoves: opts.MaxConcurrentMoves,
		CancelledMoveKeep:  opts.CancelledMoveKeep,
		Client:             mgr.GetClient(),
		Recorder:           mgr.GetEventRecorder("bucketkeeper-storagebucket"),
		Stores:             registry,
		Clock:              opts.Clock,
		SyncInterval:       opts.SyncInterval,
		ClusterID:          opts.ClusterID,
		OnStatusWrite:      metrics.ObserveStatusWrite,
		Prober:             p.prober,
		ReconcileTimeout:   opts.ReconcileTimeout,
		OnDeletionBlocked: func(key types.NamespacedName, since *time.Time) {
			metrics.SetDeletionBlocked(key.Namespace, key.Name, since)
		},
		CreateSettleTime: opts.CreateSettleTime,
	}
	if err := buckets.SetupWithManager(mgr, opts.Concurrency); err != nil {
		return fmt.Errorf("setting up the StorageBucket controller: %w", err)
	}
	// What a move whose claim is gone left behind is swept on the access collector's
	// schedule.
	if err := mgr.Add(&storagebucket.MoveSweeper{
		Reconciler: buckets,
		APIReader:  mgr.GetAPIReader(),
		Direct:     movers.direct,
		Namespace:  movers.namespace,
		Runner:     movers.runner,
		Recorder:   mgr.GetEventRecorder("bucketkeeper-move-sweeper"),
		Clock:      opts.Clock,
		Interval:   opts.AccessCollectInterval,
		Leases:     leases,
		Observe:    metrics.ObserveS3,
	}); err != nil {
		return fmt.Errorf("setting up the move sweeper: %w", err)
	}
	return nil
}

// storeLeases elects one health-checking shard per store when there are several
// shards (nil for one: it checks every store). A shard is named by its leader-election
// ID, distinct per shard and the same for all its replicas, of which only the leader
// runs the ObjectStore controller.
func storeLeases(mgr manager.Manager, opts Options) (*stores.Leases, error) {
	if opts.ShardCount <= 1 {
		return nil, nil
	}
	ns, err := opts.leaseNamespace()
	if err != nil {
		return nil, err
	}
	return &stores.Leases{
		Client:    mgr.GetClient(),
		Reader:    mgr.GetAPIReader(),
		Namespace: ns,
		Identity:  opts.LeaderElectionID,
		Clock:     opts.Clock,
	}, nil
}

// setupHealthChecks serves /healthz and /readyz unless the address turns them off.
func setupHealthChecks(mgr manager.Manager, opts Options) error {
	if opts.HealthProbeBindAddress == "0" || opts.HealthProbeBindAddress == "" {
		return nil
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("readyz", healthz.Ping)
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

// movers is what setupMover hands the controllers: the runner of moves (nil: moves
// are refused), and the client and namespace of the movers' objects.
type movers struct {
	runner    mover.Runner
	direct    client.Client
	namespace string
}

// setupMover builds the runner of moves between stores: Indexed Jobs of mover pods
// (MoverJob) or the mover in goroutines of this process, its checkpoints and each
// move's record (mover.Recorded) in ConfigMaps of the operator's namespace, read and
// written without a cache (the operator watches no ConfigMaps).
func setupMover(mgr manager.Manager, opts Options) (movers, error) {
	if opts.Mover == MoverNone {
		return movers{}, nil
	}
	ns, err := opts.moverNamespace()
	if err != nil {
		if opts.Mover == "" {
			ctrl.Log.Info("moves between stores are refused: " + err.Error())
			return movers{}, nil
		}
		return movers{}, err
	}
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return movers{}, fmt.Errorf("building the movers' client: %w", err)
	}
	recorded := func(r mover.Runner) movers {
		return movers{runner: &mover.Recorded{Runner: r, Client: direct, Namespace: ns}, direct: direct, namespace: ns}
	}
	checkpoints := &mover.ConfigMapCheckpoints{Client: direct, Namespace: ns}
	if opts.Mover == MoverJob {
		resources, err := opts.moverResources()
		if err != nil {
			return movers{}, err
		}
		return recorded(&mover.Jobs{Client: direct, Checkpoints: checkpoints, Namespace: ns, Image: opts.MoverImage,
			ServiceAccount: opts.MoverServiceAccount, Parallelism: int32(opts.MoverParallelism), Resources: resources}), nil
	}
	runner := &mover.InProcess{
		Checkpoints: checkpoints,
		Factory:     opts.S3Factory,
		Log:         ctrl.Log.WithName("mover"),
	}
	// Stopped with the manager; the checkpoints stay for the next leader.
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		runner.Close()
		return nil
	}))
	return recorded(runner), err
}
