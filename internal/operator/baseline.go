//go:build benchbaseline

package operator

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/controller/storagebucket"
	"github.com/bucketkeeper/bucketkeeper/internal/probe"
)

// The benchmark's baseline, built only with the benchbaseline tag (bench/ builds the
// manager so): a single global ticker enqueues every bucket each interval, and the
// prober probes on every reconcile and writes lastProbeTime every time. The benchmark
// measures the scheduler against it with the same harness.
func init() {
	probeStrategies["global-ticker"] = globalTicker
}

func globalTicker(mgr manager.Manager, opts Options, prober *storagebucket.Prober) storagebucket.ProbeScheduler {
	ticker := probe.NewGlobalTicker(opts.Clock, opts.DefaultProbeInterval, func(ctx context.Context) ([]client.Object, error) {
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
	prober.Naive = true
	return ticker
}
