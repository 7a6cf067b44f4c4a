// Command bucketkeeper runs the operator: it keeps buckets on S3-compatible stores in
// line with the StorageBucket objects in the cluster.
package main

import (
	"flag"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/bucketkeeper/bucketkeeper/internal/operator"
)

func main() {
	var opts operator.Options
	flag.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	flag.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "Address /healthz and /readyz bind to; \"0\" disables them.")
	flag.BoolVar(&opts.LeaderElection, "leader-elect", false, "Elect a leader so that only one replica reconciles at a time.")
	flag.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader-election Lease (default: the pod's namespace).")
	flag.IntVar(&opts.Concurrency, "concurrency", 4, "StorageBuckets reconciled at once.")
	flag.DurationVar(&opts.SyncInterval, "sync-interval", 0, "How often each bucket's configuration is re-read to correct drift (default 10m).")
	flag.DurationVar(&opts.StatusHeartbeat, "status-heartbeat", 0, "How often a timestamp alone is rewritten in status (default 5m).")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	mgr, err := operator.New(ctrl.GetConfigOrDie(), opts)
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
