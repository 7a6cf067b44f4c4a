// Package metrics defines bucketkeeper's Prometheus metrics on controller-runtime's
// registry, so they are served with the controller metrics on the manager's endpoint.
package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

var (
	// S3Requests counts every HTTP attempt to a store, by operation and answer.
	S3Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketkeeper_s3_requests_total",
		Help: "S3 requests sent, by store, operation and HTTP status code (or error kind when no answer arrived).",
	}, []string{"store", "operation", "code"})

	// StatusWrites counts status patches; the operator skips writes that change nothing.
	StatusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketkeeper_status_writes_total",
		Help: "Status writes to the API server, by kind.",
	}, []string{"kind"})
)

var registerOnce sync.Once

// Register adds the metrics to controller-runtime's registry (once per process).
func Register() {
	registerOnce.Do(func() {
		crmetrics.Registry.MustRegister(S3Requests, StatusWrites)
	})
}

// ObserveS3 records one S3 attempt. Without an HTTP answer the code is the error kind,
// e.g. "Unreachable", so outages are visible in the same series.
func ObserveS3(store, operation string, status int, err error) {
	code := strconv.Itoa(status)
	if status == 0 {
		code = "none"
		if err != nil {
			code = s3.KindOf(err).String()
		}
	}
	S3Requests.WithLabelValues(store, operation, code).Inc()
}

// ObserveStatusWrite records one status write of the given kind.
func ObserveStatusWrite(kind string) {
	StatusWrites.WithLabelValues(kind).Inc()
}
