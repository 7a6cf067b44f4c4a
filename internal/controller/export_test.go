package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// PatchStorageBucketMetadata exposes patchMetadata to the black-box tests.
func PatchStorageBucketMetadata(ctx context.Context, c client.Client, sb *bkv1.StorageBucket, mutate func(*bkv1.StorageBucket)) error {
	return reconcile.PatchMetadata(ctx, c, sb, mutate)
}

// MinCheckGap exposes the shortest gap between two health checks of one store.
const MinCheckGap = defaults.MinStoreCheckGap

// ConnectionDataDigest and CachedDataDigest expose the cache's digest of a connection
// Secret's data to the black-box tests.
var ConnectionDataDigest = reconcile.ConnectionDataDigest

const CachedDataDigest = bkv1.LabelCachedDataDigest
