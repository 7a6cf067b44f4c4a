package manifests

import (
	"strings"
	"testing"
	"time"

	prom "github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
)

// TestAlertExpressionsSelectTheRightSeries evaluates each alert's expression with
// Prometheus' own engine on series shaped like the manager's, at one instant 30
// minutes in (time() = 1800) unless the case says another: each must select exactly
// the series in trouble. The for: durations are Prometheus' to apply and not
// evaluated here.
func TestAlertExpressionsSelectTheRightSeries(t *testing.T) {
	exprs := map[string]string{}
	for _, g := range ruleGroups(t).Groups {
		for _, r := range g.Rules {
			// promqltest reads one expression per line.
			exprs[r.Alert] = strings.Join(strings.Fields(r.Expr), " ")
		}
	}
	cases := []struct {
		alert, series, want string
		at                  string // the instant evaluated; "" for 30m
	}{{
		alert: "BucketkeeperBucketUnavailable",
		series: `
  bucketkeeper_bucket_available{namespace="a",name="down"} 0x30
  bucketkeeper_bucket_available{namespace="a",name="up"} 1x30`,
		want: `bucketkeeper_bucket_available{namespace="a",name="down"} 0`,
	}, {
		// fresh: a success every minute. stuck: none since 0 with a 1m interval.
		// slow: none since 0, but a 1h interval. down: failing, which the other alert
		// reports. unreachable: no verdict (store down), so no availability series.
		alert: "BucketkeeperBucketProbesStale",
		series: `
  bucketkeeper_bucket_last_successful_probe_timestamp_seconds{namespace="a",name="fresh"} 0+60x30
  bucketkeeper_bucket_last_successful_probe_timestamp_seconds{namespace="a",name="stuck"} 0x30
  bucketkeeper_bucket_last_successful_probe_timestamp_seconds{namespace="a",name="slow"} 0x30
  bucketkeeper_bucket_last_successful_probe_timestamp_seconds{namespace="a",name="down"} 0x30
  bucketkeeper_bucket_last_successful_probe_timestamp_seconds{namespace="a",name="unreachable"} 0x30
  bucketkeeper_bucket_probe_interval_seconds{namespace="a",name="fresh"} 60x30
  bucketkeeper_bucket_probe_interval_seconds{namespace="a",name="stuck"} 60x30
  bucketkeeper_bucket_probe_interval_seconds{namespace="a",name="slow"} 3600x30
  bucketkeeper_bucket_probe_interval_seconds{namespace="a",name="down"} 60x30
  bucketkeeper_bucket_probe_interval_seconds{namespace="a",name="unreachable"} 60x30
  bucketkeeper_bucket_available{namespace="a",name="fresh"} 1x30
  bucketkeeper_bucket_available{namespace="a",name="stuck"} 1x30
  bucketkeeper_bucket_available{namespace="a",name="slow"} 1x30
  bucketkeeper_bucket_available{namespace="a",name="down"} 0x30`,
		want: `
  {namespace="a",name="stuck"} 1800
  {namespace="a",name="unreachable"} 1800`,
	}, {
		alert: "BucketkeeperObjectStoreNotReady",
		series: `
  bucketkeeper_objectstore_ready{store="broken"} 0x30
  bucketkeeper_objectstore_ready{store="fine"} 1x30`,
		want: `bucketkeeper_objectstore_ready{store="broken"} 0`,
	}, {
		// One reconcile in three of storagebucket fails; objectstore never does; another
		// operator's controller in the same Prometheus is none of ours.
		alert: "BucketkeeperReconcileErrors",
		series: `
  controller_runtime_reconcile_total{controller="storagebucket",result="success"} 0+10x30
  controller_runtime_reconcile_total{controller="storagebucket",result="error"} 0+5x30
  controller_runtime_reconcile_errors_total{controller="storagebucket"} 0+5x30
  controller_runtime_reconcile_total{controller="objectstore",result="success"} 0+10x30
  controller_runtime_reconcile_errors_total{controller="objectstore"} 0x30
  controller_runtime_reconcile_total{controller="someone-elses",result="error"} 0+10x30
  controller_runtime_reconcile_errors_total{controller="someone-elses"} 0+10x30`,
		want: `{controller="storagebucket"} 0.3333333333333333`,
	}, {
		// 10% of slow's requests are 503 SlowDown; 1% of busy's are 429.
		alert: "BucketkeeperS3Throttled",
		series: `
  bucketkeeper_s3_requests_total{store="slow",operation="HeadBucket",code="200"} 0+90x30
  bucketkeeper_s3_requests_total{store="slow",operation="PutObject",code="503"} 0+10x30
  bucketkeeper_s3_requests_total{store="busy",operation="HeadBucket",code="200"} 0+99x30
  bucketkeeper_s3_requests_total{store="busy",operation="HeadBucket",code="429"} 0+1x30
  bucketkeeper_s3_requests_total{store="down",operation="HeadBucket",code="Unreachable"} 0+50x30`,
		want: `{store="slow"} 0.1`,
	}, {
		// full: 95% of its size quota; many: 95% of its object quota; both: over 90% of
		// both (the size's share is reported); half: 50%; unlimited: no quota series.
		alert: "BucketkeeperBucketNearQuota",
		series: `
  bucketkeeper_bucket_usage_bytes{namespace="a",name="full"} 950x30
  bucketkeeper_bucket_quota_bytes{namespace="a",name="full"} 1000x30
  bucketkeeper_bucket_usage_objects{namespace="a",name="full"} 1x30
  bucketkeeper_bucket_usage_bytes{namespace="a",name="many"} 10x30
  bucketkeeper_bucket_usage_objects{namespace="a",name="many"} 95x30
  bucketkeeper_bucket_quota_objects{namespace="a",name="many"} 100x30
  bucketkeeper_bucket_usage_bytes{namespace="a",name="both"} 990x30
  bucketkeeper_bucket_quota_bytes{namespace="a",name="both"} 1000x30
  bucketkeeper_bucket_usage_objects{namespace="a",name="both"} 92x30
  bucketkeeper_bucket_quota_objects{namespace="a",name="both"} 100x30
  bucketkeeper_bucket_usage_bytes{namespace="a",name="half"} 500x30
  bucketkeeper_bucket_quota_bytes{namespace="a",name="half"} 1000x30
  bucketkeeper_bucket_usage_objects{namespace="a",name="half"} 50x30
  bucketkeeper_bucket_quota_objects{namespace="a",name="half"} 100x30
  bucketkeeper_bucket_usage_bytes{namespace="a",name="unlimited"} 1e12x30
  bucketkeeper_bucket_usage_objects{namespace="a",name="unlimited"} 1e9x30`,
		want: `
  {namespace="a",name="full"} 0.95
  {namespace="a",name="many"} 0.95
  {namespace="a",name="both"} 0.99`,
	}, {
		// Two hours in: stuck has not progressed since minute 10; moving progresses every
		// minute; slow last progressed 55 minutes ago, within the hour. A move that ended
		// has no series.
		alert: "BucketkeeperMoveStalled",
		at:    "2h",
		series: `
  bucketkeeper_move_last_progress_timestamp_seconds{namespace="a",name="stuck"} 600x130
  bucketkeeper_move_last_progress_timestamp_seconds{namespace="a",name="moving"} 0+60x130
  bucketkeeper_move_last_progress_timestamp_seconds{namespace="a",name="slow"} 3900x130`,
		want: `{namespace="a",name="stuck"} 6600`,
	}, {
		// stuck: buckets queued, not started and skipped, none moving, not paused.
		// moving: one moves, the rest wait their turn. paused: held on purpose. done:
		// every bucket moved.
		alert: "BucketkeeperRetirementStalled",
		series: `
  bucketkeeper_objectstore_retirement_buckets{store="stuck",state="moved"} 3x30
  bucketkeeper_objectstore_retirement_buckets{store="stuck",state="moving"} 0x30
  bucketkeeper_objectstore_retirement_buckets{store="stuck",state="queued"} 1x30
  bucketkeeper_objectstore_retirement_buckets{store="stuck",state="skipped"} 1x30
  bucketkeeper_objectstore_retirement_buckets{store="stuck",state="remaining"} 2x30
  bucketkeeper_objectstore_retirement_paused{store="stuck"} 0x30
  bucketkeeper_objectstore_retirement_buckets{store="moving",state="moved"} 0x30
  bucketkeeper_objectstore_retirement_buckets{store="moving",state="moving"} 1x30
  bucketkeeper_objectstore_retirement_buckets{store="moving",state="queued"} 2x30
  bucketkeeper_objectstore_retirement_buckets{store="moving",state="skipped"} 0x30
  bucketkeeper_objectstore_retirement_buckets{store="moving",state="remaining"} 0x30
  bucketkeeper_objectstore_retirement_paused{store="moving"} 0x30
  bucketkeeper_objectstore_retirement_buckets{store="paused",state="moved"} 0x30
  bucketkeeper_objectstore_retirement_buckets{store="paused",state="moving"} 0x30
  bucketkeeper_objectstore_retirement_buckets{store="paused",state="queued"} 4x30
  bucketkeeper_objectstore_retirement_buckets{store="paused",state="skipped"} 0x30
  bucketkeeper_objectstore_retirement_buckets{store="paused",state="remaining"} 0x30
  bucketkeeper_objectstore_retirement_paused{store="paused"} 1x30
  bucketkeeper_objectstore_retirement_buckets{store="done",state="moved"} 5x30
  bucketkeeper_objectstore_retirement_buckets{store="done",state="moving"} 0x30
  bucketkeeper_objectstore_retirement_buckets{store="done",state="queued"} 0x30
  bucketkeeper_objectstore_retirement_buckets{store="done",state="skipped"} 0x30
  bucketkeeper_objectstore_retirement_buckets{store="done",state="remaining"} 0x30
  bucketkeeper_objectstore_retirement_paused{store="done"} 0x30`,
		want: `{store="stuck"} 4`,
	}, {
		// Two hours in: locked has waited since minute 10; fresh since 50 minutes ago.
		alert: "BucketkeeperDeletionBlocked",
		at:    "2h",
		series: `
  bucketkeeper_bucket_deletion_blocked_since_timestamp_seconds{namespace="a",name="locked"} 600x130
  bucketkeeper_bucket_deletion_blocked_since_timestamp_seconds{namespace="a",name="fresh"} 4200x130`,
		want: `{namespace="a",name="locked"} 6600`,
	}, {
		alert: "BucketkeeperAccessNotReady",
		series: `
  bucketkeeper_bucketaccess_ready{namespace="a",name="waiting"} 0x30
  bucketkeeper_bucketaccess_ready{namespace="a",name="issued"} 1x30`,
		want: `bucketkeeper_bucketaccess_ready{namespace="a",name="waiting"} 0`,
	}}
	// A Prometheus server's defaults (the @ modifier and negative offsets are on by
	// default since 2.33; the test engine's own options also turn on delayed name
	// removal, a feature flag).
	engine := promqltest.NewTestEngineWithOpts(t, prom.EngineOpts{
		MaxSamples:               promqltest.DefaultMaxSamplesPerQuery,
		Timeout:                  time.Minute,
		LookbackDelta:            5 * time.Minute,
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
		Parser:                   promql,
	})
	for _, tc := range cases {
		expr, ok := exprs[tc.alert]
		if !ok {
			t.Errorf("no alert %s in %s", tc.alert, rulesFile)
			continue
		}
		delete(exprs, tc.alert)
		at := tc.at
		if at == "" {
			at = "30m"
		}
		t.Run(tc.alert, func(t *testing.T) {
			promqltest.RunTest(t, "load 1m"+tc.series+"\n\neval instant at "+at+" "+expr+"\n"+indent(tc.want)+"\n", engine)
		})
	}
	for alert := range exprs {
		t.Errorf("alert %s has no evaluation case here", alert)
	}
}

func indent(lines string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		out = append(out, "  "+strings.TrimSpace(l))
	}
	return strings.Join(out, "\n")
}
