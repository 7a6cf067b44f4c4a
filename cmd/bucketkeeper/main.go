// Command bucketkeeper runs the operator: it keeps buckets on S3-compatible stores in
// line with the StorageBucket objects in the cluster. `bucketkeeper mover` runs one
// shard of a bucket's move to another store, as the operator's mover Jobs do.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/receiver"
)

// extraFlags are flags of special builds: the benchmark's adds --probe-strategy
// (baseline.go).
var extraFlags []func(*flag.FlagSet, *operator.Options)

func main() {
	// `bucketkeeper mover ...` runs one shard of a move's pass (mover.go): the
	// operator's own image is the mover Jobs' image.
	if len(os.Args) > 1 && os.Args[1] == "mover" {
		os.Exit(runMover(os.Args[2:]))
	}
	var opts operator.Options
	var receiverSecretFile string
	var receiverClusterWide bool
	var kubeQPS float64
	var kubeBurst int
	flag.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", defaults.MetricsBindAddress, "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	flag.BoolVar(&opts.MetricsSecure, "metrics-secure", false, "Serve metrics over HTTPS to callers the API server authenticates and authorizes for GET /metrics (the manifests turn this on).")
	flag.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", defaults.HealthProbeBindAddress, "Address /healthz and /readyz bind to; \"0\" disables them.")
	flag.BoolVar(&opts.LeaderElection, "leader-elect", false, "Elect a leader so that only one replica reconciles and probes at a time.")
	flag.StringVar(&opts.LeaderElectionID, "leader-election-id", defaults.LeaderElectionID, "Name of the leader-election Lease; give each shard (--watch-label-selector) its own.")
	flag.DurationVar(&opts.LeaseDuration, "leader-election-lease-duration", defaults.LeaseDuration, "How long a lost leader's lease blocks a takeover.")
	flag.DurationVar(&opts.RenewDeadline, "leader-election-renew-deadline", defaults.RenewDeadline, "How long the leader keeps trying to renew before giving up leadership.")
	flag.DurationVar(&opts.RetryPeriod, "leader-election-retry-period", defaults.RetryPeriod, "How often candidates try to acquire or renew the lease.")
	flag.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader-election Lease (default: the pod's namespace).")
	flag.StringVar(&opts.Mover, "mover", "", "How moves between stores (spec.move) copy objects: job (an Indexed Job of mover pods per pass, in --mover-namespace), in-process (goroutines of the operator) or none (moves are refused). Default: in-process where --mover-namespace is known.")
	flag.StringVar(&opts.MoverImage, "mover-image", "", "Image of the mover pods with --mover=job: the operator's own.")
	flag.StringVar(&opts.MoverServiceAccount, "mover-service-account", "", "ServiceAccount of the mover pods with --mover=job (it writes ConfigMaps of --mover-namespace).")
	flag.IntVar(&opts.MoverParallelism, "mover-parallelism", 0, "The most mover pods of one pass of a move at once (0: one per shard).")
	flag.StringVar(&opts.MoverCPU, "mover-cpu", "", "CPU of each mover pod, requested and its limit (a quantity, e.g. 500m).")
	flag.StringVar(&opts.MoverMemory, "mover-memory", "", "Memory of each mover pod, requested and its limit (a quantity, e.g. 128Mi).")
	flag.IntVar(&opts.MaxConcurrentMoves, "max-concurrent-moves", defaults.MaxConcurrentMoves, "The most moves between stores this operator runs at once, whatever their stores (each store bounds its own with guardrails.moves.maxConcurrent); moves beyond wait in phase Queued.")
	flag.StringVar(&opts.MoverNamespace, "mover-namespace", "", "Namespace of the moves' checkpoint ConfigMaps (default: --leader-election-namespace, else the pod's namespace).")
	flag.StringVar(&opts.ClusterID, "cluster-id", "", "Identity of this cluster in bucket ownership tags and IAM user names; clusters sharing a store need different ones (default: the kube-system namespace's UID).")
	flag.IntVar(&opts.Concurrency, "concurrency", defaults.Concurrency, "StorageBuckets reconciled at once, and BucketAccesses.")
	flag.DurationVar(&opts.SyncInterval, "sync-interval", defaults.SyncInterval, "How often each bucket's configuration is re-read to correct drift.")
	flag.DurationVar(&opts.UsageInterval, "usage-interval", defaults.UsageInterval, "Least time between two reads of a bucket's usage from its store's admin API (each rides on a probe).")
	flag.DurationVar(&opts.StatusHeartbeat, "status-heartbeat", defaults.StatusHeartbeat, "How often lastProbeTime alone is rewritten in status when the verdict does not change.")
	flag.DurationVar(&opts.S3RequestTimeout, "s3-request-timeout", defaults.S3RequestTimeout, "Deadline of every S3 call, retries included; also how long a store may take to send response headers.")
	flag.DurationVar(&opts.ReconcileTimeout, "reconcile-timeout", defaults.ReconcileTimeout, "Deadline of each reconcile of a StorageBucket or ObjectStore as a whole.")
	flag.DurationVar(&opts.CreateSettleTime, "create-settle-time", defaults.CreateSettleTime, "How long after a CreateBucket went unanswered (timeout, dropped connection, server error) the store may still carry it out; a deletion that finds no bucket waits that long before it concludes there is nothing to delete.")
	flag.DurationVar(&opts.DefaultProbeInterval, "default-probe-interval", defaults.ProbeInterval, "Probe interval of StorageBuckets that set none.")
	flag.StringVar(&opts.WatchNamespace, "watch-namespace", "", "Only reconcile StorageBuckets in this namespace (default: all).")
	flag.StringVar(&opts.WatchLabelSelector, "watch-label-selector", "", "Only reconcile StorageBuckets and BucketAccesses matching this label selector (sharding across deployments).")
	flag.IntVar(&opts.ShardCount, "shard-count", defaults.ShardCount, "Number of operator deployments splitting the buckets with --watch-label-selector; set the same on each. Above 1 each spends 1/N of every store's request budget, and one shard per store, elected by a Lease in the leader-election namespace, health-checks it.")
	flag.BoolVar(&opts.DisableAvailabilityMetric, "disable-availability-metric", false, "Do not export the per-bucket series (bucketkeeper_bucket_available, bucketkeeper_bucket_last_successful_probe_timestamp_seconds, bucketkeeper_bucket_probe_interval_seconds).")
	flag.StringVar(&opts.ReceiverBindAddress, "receiver-bind-address", "", "Serve the signed probe-request webhook (POST /v1/probe) here; empty disables it.")
	flag.StringVar(&opts.ReceiverKeysNamespace, "receiver-keys-namespace", "", "Namespace whose Secrets labelled bucketkeeper.io/secret-role=receiver-key are the webhook's keys, each reaching the namespaces its bucketkeeper.io/receiver-namespaces annotation names; only the platform team may write Secrets there (default: the pod's namespace).")
	flag.StringVar(&receiverSecretFile, "receiver-secret-file", "", "File holding a cluster-wide HMAC key (at least 16 bytes) for requests that name no key; needs --receiver-cluster-wide-key.")
	flag.BoolVar(&receiverClusterWide, "receiver-cluster-wide-key", false, "Accept the key of --receiver-secret-file, whose holder may probe the StorageBuckets of every namespace and learn which claims use a bucket name.")
	flag.StringVar(&opts.ReceiverTLSCertFile, "receiver-tls-cert-file", "", "PEM certificate (chain) the webhook serves HTTPS with; needs --receiver-tls-key-file. Empty: plain HTTP.")
	flag.StringVar(&opts.ReceiverTLSKeyFile, "receiver-tls-key-file", "", "PEM private key of --receiver-tls-cert-file.")
	flag.DurationVar(&opts.MinProbeRequestInterval, "min-probe-request-interval", defaults.MinProbeRequestInterval, "At most one on-demand probe (annotation or webhook) per bucket per interval; requests inside it are served together at its end.")
	flag.Float64Var(&kubeQPS, "kube-api-qps", defaults.KubeAPIQPS, "Queries per second to the Kubernetes API server.")
	flag.IntVar(&kubeBurst, "kube-api-burst", defaults.KubeAPIBurst, "Burst of queries to the Kubernetes API server.")
	flag.DurationVar(&opts.AccessKeyGrace, "access-key-grace", defaults.AccessKeyGrace, "How long a rotated-out access key stays valid after the Secret received its successor.")
	flag.DurationVar(&opts.AccessCollectInterval, "access-collect-interval", defaults.AccessCollectInterval, "How often each IAM store's users are listed to delete those no BucketAccess grants any more (the longest a key outlives an access deleted without the operator's finalizer), and what moves of StorageBuckets deleted without it left behind is swept.")
	flag.StringVar(&opts.PprofBindAddress, "pprof-bind-address", "", "Serve net/http/pprof here for profiling; empty disables it.")
	for _, add := range extraFlags {
		add(flag.CommandLine, &opts)
	}
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	switch {
	case receiverSecretFile != "" && !receiverClusterWide:
		fmt.Fprintln(os.Stderr, "--receiver-secret-file is a key for every namespace: its holder may probe any StorageBucket and learn which claims use a bucket name. "+
			"Add --receiver-cluster-wide-key to accept it so, or give each caller a key of its namespaces (a Secret labelled bucketkeeper.io/secret-role=receiver-key in the operator's namespace) and drop the file.")
		os.Exit(2)
	case receiverClusterWide && receiverSecretFile == "":
		fmt.Fprintln(os.Stderr, "--receiver-cluster-wide-key needs the key: --receiver-secret-file")
		os.Exit(2)
	case opts.ReceiverBindAddress != "" && receiverSecretFile != "":
		secret, err := receiver.LoadSecret(receiverSecretFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "--receiver-secret-file:", err)
			os.Exit(2)
		}
		opts.ReceiverClusterWideSecret = secret
	}
	if (opts.ReceiverTLSCertFile == "") != (opts.ReceiverTLSKeyFile == "") {
		fmt.Fprintln(os.Stderr, "--receiver-tls-cert-file and --receiver-tls-key-file go together: set both or neither")
		os.Exit(2)
	}
	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(kubeQPS), kubeBurst

	mgr, err := operator.New(cfg, opts)
	if err != nil {
		log.Error(err, "unable to set up the manager")
		os.Exit(1)
	}
	log.Info("starting bucketkeeper")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager stopped with an error")
		os.Exit(1)
	}
}
