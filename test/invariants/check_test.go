package invariants

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestCheckCleanWorld(t *testing.T) {
	expectNone(t, newWorld(t).check(t))
}

// TestCheckUnreadableIsAViolation: a store or cluster the checker cannot read is never a
// pass.
func TestCheckUnreadableIsAViolation(t *testing.T) {
	w := newWorld(t)
	w.s3.listErr = errBoom
	expectOnly(t, w.check(t), Unreadable, "store "+store, "boom")

	// A client without the operator's types cannot list StorageBuckets.
	c := fake.NewClientBuilder().Build()
	got := Check(context.Background(), c, nil, cluster)
	expectOnly(t, got, Unreadable, "cluster", "StorageBuckets")
}
