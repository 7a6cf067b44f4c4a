package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestOnlyTheLeaderProbes: two managers share a lease; only the leader's scheduler
// sends probe events. When the leader stops, the other takes over and probing goes on.
// Neither sends drift checks, so every HeadBucket is a probe; they are counted per
// manager and bucket.
func TestOnlyTheLeaderProbes(t *testing.T) {
	f := newFixture(t, seaweed)
	type instance struct {
		heads  *headLog
		cancel context.CancelFunc
		done   <-chan struct{}
	}
	start := func() *instance {
		in := &instance{heads: &headLog{times: map[string][]time.Time{}}}
		ctx, cancel := context.WithCancel(f.ctx)
		in.cancel = cancel
		done, err := startManager(ctx, operator.Options{
			WatchLabelSelector: isolatedLabel + "=" + f.ns, LeaderElection: true, LeaderElectionNamespace: "default",
			LeaderElectionID: "leader-test-" + f.ns, LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
			// Short probe intervals (the default, for buckets that set none) keep
			// the test short; no drift checks, so every HeadBucket is a probe.
			SyncInterval: time.Hour, DefaultProbeInterval: 2 * time.Second,
			S3Factory: func(ctx context.Context, cfg s3.Config) (s3.Client, error) {
				c, err := s3.New(ctx, cfg)
				return countingHeads{Client: c, log: in.heads}, err
			},
		})
		must(t, err)
		in.done = done
		return in
	}
	a, b := start(), start()
	defer func() {
		for _, in := range []*instance{a, b} {
			in.cancel()
			<-in.done
		}
	}()

	var sbs []*bkv1.StorageBucket
	for i := range 3 {
		sbs = append(sbs, f.bucket(fmt.Sprintf("ha-%d", i), func(sb *bkv1.StorageBucket) {
			sb.Labels = map[string]string{isolatedLabel: f.ns}
		}))
	}
	var buckets []string
	for _, sb := range sbs {
		buckets = append(buckets, f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded).Status.BucketName)
	}
	total := func(in *instance) int {
		n := 0
		for _, bucket := range buckets {
			n += in.heads.count(bucket)
		}
		return n
	}
	leader, follower := a, b
	if total(b) > total(a) {
		leader, follower = b, a
	}
	// Creating a bucket sends HeadBucket twice (the bucket step's check, then the first
	// probe), both before Available is written; with no drift checks, the next one is
	// a probe from the leader's scheduler, at the bucket's slot.
	created := map[string]int{}
	for _, bucket := range buckets {
		created[bucket] = leader.heads.count(bucket)
	}
	f.eventually(60*time.Second, "a scheduled probe of every bucket", func() error {
		for _, bucket := range buckets {
			if n := leader.heads.count(bucket) - created[bucket]; n < 1 {
				return errf("%s: no scheduled probe by the leader yet", bucket)
			}
		}
		return nil
	})
	if n := total(follower); n != 0 {
		t.Fatalf("the follower sent %d HeadBucket requests; want only the leader probing", n)
	}
	stopped := time.Now()
	leader.cancel()
	<-leader.done
	// The new leader first resyncs each bucket (one HeadBucket), then probes it at its
	// slot: a second HeadBucket.
	f.eventually(30*time.Second, "the other manager to take over probing", func() error {
		for _, bucket := range buckets {
			if n := follower.heads.count(bucket); n < 2 {
				return errf("%s: %d HeadBucket from the new leader, want its resync and a probe", bucket, n)
			}
		}
		return nil
	})
	t.Logf("probing resumed %s after the leader stopped", time.Since(stopped).Round(100*time.Millisecond))

	// The new leader also finishes the deletions.
	for _, sb := range sbs {
		must(t, k8s.Delete(f.ctx, sb))
	}
	for _, sb := range sbs {
		f.waitGone(sb)
	}
}
