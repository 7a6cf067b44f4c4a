package controller_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
)

// TestOnlyTheLeaderProbes: two managers share a lease; only the leader's scheduler
// sends probe events. When the leader stops, the other takes over and probing goes on.
func TestOnlyTheLeaderProbes(t *testing.T) {
	f := newFixture(t, seaweed)
	type instance struct {
		heads  atomic.Int64
		cancel context.CancelFunc
		done   <-chan struct{}
	}
	start := func() *instance {
		in := &instance{}
		ctx, cancel := context.WithCancel(f.ctx)
		in.cancel = cancel
		done, err := startManager(ctx, operator.Options{
			WatchLabelSelector: isolatedLabel, LeaderElection: true, LeaderElectionNamespace: "default",
			LeaderElectionID: "leader-test-" + f.ns, LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
			S3Observer: func(store, op string, _ int, _ error) {
				if store == f.store && op == "HeadBucket" {
					in.heads.Add(1)
				}
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
		sbs = append(sbs, f.bucket(fmt.Sprintf("ha-%d", i), probeEvery(10*time.Second, bkv1.ProbeModeHead), func(sb *bkv1.StorageBucket) {
			sb.Labels = map[string]string{isolatedLabel: "true"}
		}))
	}
	for _, sb := range sbs {
		f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	}
	time.Sleep(12 * time.Second)
	leader, follower := a, b
	if b.heads.Load() > a.heads.Load() {
		leader, follower = b, a
	}
	if leader.heads.Load() == 0 || follower.heads.Load() != 0 {
		t.Fatalf("HeadBucket requests: leader %d, follower %d; want only the leader probing", leader.heads.Load(), follower.heads.Load())
	}

	stopped := time.Now()
	leader.cancel()
	<-leader.done
	f.eventually(30*time.Second, "the other manager to take over probing", func() error {
		if follower.heads.Load() == 0 {
			return errf("no probe from the new leader yet")
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
