//go:build benchbaseline

package main

import (
	"flag"

	"github.com/bucketkeeper/bucketkeeper/internal/operator"
)

// The benchmark builds the manager with the benchbaseline tag, which adds the
// baseline it measures the probe scheduler against.
func init() {
	extraFlags = append(extraFlags, func(fs *flag.FlagSet, opts *operator.Options) {
		fs.StringVar(&opts.ProbeStrategy, "probe-strategy", "scheduler",
			"\"global-ticker\" runs the benchmark's baseline: every bucket enqueued each interval, lastProbeTime written on every probe.")
	})
}
