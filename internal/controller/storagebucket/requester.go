package storagebucket

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// ProbeRequester turns an authenticated webhook request into a probe. It annotates the
// StorageBucket instead of feeding this process's event channel: every replica can serve
// the webhook, and the annotation reaches whichever replica leads, through the same
// path as `kubectl annotate` (see AnnotationProbeRequestedAt).
type ProbeRequester struct {
	Client client.Client
	Clock  clock.PassiveClock
}

// BucketsNamed finds the StorageBuckets of namespace ("": of all) by status.bucketName
// through a field index. The cache indexes each value per namespace too, so a lookup
// in one namespace never reads another's StorageBuckets: the receiver's answers to a
// namespaced key then cost the same whatever other namespaces hold.
func (q *ProbeRequester) BucketsNamed(ctx context.Context, bucket, namespace string) ([]types.NamespacedName, error) {
	list := &bkv1.StorageBucketList{}
	if err := q.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{reconcile.IndexStorageBucketBucketName: bucket}); err != nil {
		return nil, err
	}
	out := make([]types.NamespacedName, 0, len(list.Items))
	for _, sb := range list.Items {
		out = append(out, client.ObjectKeyFromObject(&sb))
	}
	return out, nil
}

func (q *ProbeRequester) Exists(ctx context.Context, key types.NamespacedName) (bool, error) {
	err := q.Client.Get(ctx, key, &bkv1.StorageBucket{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func (q *ProbeRequester) RequestProbe(ctx context.Context, key types.NamespacedName) error {
	sb := &bkv1.StorageBucket{}
	if err := q.Client.Get(ctx, key, sb); err != nil {
		return err
	}
	return reconcile.PatchMetadata(ctx, q.Client, sb, func(o *bkv1.StorageBucket) {
		if o.Annotations == nil {
			o.Annotations = map[string]string{}
		}
		o.Annotations[bkv1.AnnotationProbeRequestedAt] = q.Clock.Now().UTC().Format(time.RFC3339Nano)
	})
}
