package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
)

// TestShardingByLabel runs two operators with disjoint --watch-label-selector and
// --shard-count=2, as two deployments splitting one cluster's buckets: every claim is
// served, and by exactly one of them (each sends CreateBucket for its own shard only).
// Both run the ObjectStore controller for the shared store, but only the shard that
// holds the store's Lease health-checks it.
func TestShardingByLabel(t *testing.T) {
	counts := &opCounter{byShard: map[string]map[string]int{}}
	managers := map[string]manager.Manager{}
	checks := &opCounter{byShard: map[string]map[string]int{}}
	ctx := context.Background()
	leases := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-shard-leases-"}}
	must(t, k8s.Create(ctx, leases))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), leases) })
	for _, shard := range []string{"a", "b"} {
		managers[shard] = startManager(t, cfg, operator.Options{
			WatchLabelSelector: "shard=" + shard,
			ShardCount:         2, LeaderElectionID: "shard-" + shard + ".bucketkeeper.io", LeaderElectionNamespace: leases.Name,
			S3Observer: func(store, op string, _ int, _ error) {
				switch op {
				case "CreateBucket":
					counts.add(shard, store)
				case "ListBuckets": // the store health check
					checks.add(shard, store)
				}
			},
		})
	}
	f := newFixture(t, "")

	const perShard = 3
	var sbs []*bkv1.StorageBucket
	for _, shard := range []string{"a", "b"} {
		for i := range perShard {
			sbs = append(sbs, f.bucket(fmt.Sprintf("shard-%s-%d", shard, i), map[string]string{"shard": shard}))
		}
	}
	for _, sb := range sbs {
		f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, "", 2*time.Minute)
	}
	// An operator reconciles only what its cache holds: each shard's cache, which has
	// served every claim of its shard by now, holds no claim of the other shard, so no
	// operator can ever answer another shard's claim.
	for shard, mgr := range managers {
		list := &bkv1.StorageBucketList{}
		must(t, mgr.GetCache().List(f.ctx, list, client.InNamespace(f.ns)))
		if len(list.Items) != perShard {
			t.Errorf("the shard=%s operator's cache holds %d claims of %s, want its %d", shard, len(list.Items), f.ns, perShard)
		}
		for _, sb := range list.Items {
			if sb.Labels["shard"] != shard {
				t.Errorf("the shard=%s operator's cache holds %s of shard %q", shard, sb.Name, sb.Labels["shard"])
			}
		}
	}
	for _, shard := range []string{"a", "b"} {
		if got := counts.get(shard, f.store); got != perShard {
			t.Errorf("the shard=%s operator sent %d CreateBucket requests to %s, want %d", shard, got, f.store, perShard)
		}
	}
	// Over three health-check intervals (5s each), the shard holding the store's
	// Lease checks it and the other never does.
	f.eventually(time.Minute, "three health checks of the store", func() error {
		if n := checks.get("a", f.store) + checks.get("b", f.store); n < 3 {
			return fmt.Errorf("%d so far", n)
		}
		return nil
	})
	if a, b := checks.get("a", f.store), checks.get("b", f.store); a != 0 && b != 0 {
		t.Errorf("both shards health-checked %s (a: %d, b: %d), want only the Lease's holder", f.store, a, b)
	}
	claims, err := f.claimedBuckets()
	must(t, err)
	for _, sb := range sbs {
		if buckets := claims[f.ns+"/"+sb.Name]; len(buckets) != 1 {
			t.Errorf("claim %s/%s has buckets %v on SeaweedFS, want exactly one", f.ns, sb.Name, buckets)
		}
	}
}

// opCounter counts requests of one operation per shard and store.
type opCounter struct {
	mu      sync.Mutex
	byShard map[string]map[string]int
}

func (c *opCounter) add(shard, store string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byShard[shard] == nil {
		c.byShard[shard] = map[string]int{}
	}
	c.byShard[shard][store]++
}

func (c *opCounter) get(shard, store string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byShard[shard][store]
}
