package storagebucket

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"strings"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// refuseSameBucket refuses a move whose target store serves, under the bucket's name,
// the very bucket the claim lives in: two ObjectStores the platform team declared for
// one server (two lanes of one Ceph RGW, one endpoint named twice). Such a move would
// copy the bucket onto itself, freeze it for good at the cutover, and
// deleteSourceAfter would delete the only copy. Equal endpoints were refused already,
// without a request (refuseSameEndpoint, in moveTarget); here the target's existing
// bucket (found tagged as this claim's, as the source is) gets a tag only this move
// writes, which is looked for on the source, and taken off again.
func (r *Reconciler) refuseSameBucket(ctx context.Context, scope *bucketScope, t *moveTargetScope, m *bkv1.MoveStatus, targetTags map[string]string) error {
	// A probe left by a stopped operator is not the target's own.
	kept := maps.Clone(targetTags)
	delete(kept, bkv1.TagMoveProbe)
	probed := maps.Clone(kept)
	probed[bkv1.TagMoveProbe] = m.ID
	if err := t.s3.PutBucketTagging(ctx, t.bucket, probed); err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("tagging bucket %q of ObjectStore %q to tell it from the source", t.bucket, t.store.Name))
	}
	sourceTags, err := scope.s3.GetBucketTagging(ctx, scope.bucket)
	if err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("reading the tags of the source bucket %q", scope.bucket))
	}
	// Put back either way: on one bucket this restores the source's own tags.
	if err := t.s3.PutBucketTagging(ctx, t.bucket, kept); err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("untagging bucket %q of ObjectStore %q", t.bucket, t.store.Name))
	}
	if sourceTags[bkv1.TagMoveProbe] == m.ID {
		return sameBucketRefusal(scope, t)
	}
	return nil
}

// refuseSameEndpoint refuses, without a request, a move to a store declared with the
// source's endpoint: the bucket keeps its name, so it is the same bucket.
func refuseSameEndpoint(scope *bucketScope, t *moveTargetScope) error {
	if sameEndpoint(scope.store.Spec.Endpoint, t.store.Spec.Endpoint) && scope.bucket == t.bucket {
		return sameBucketRefusal(scope, t)
	}
	return nil
}

func sameBucketRefusal(scope *bucketScope, t *moveTargetScope) error {
	return reconcile.Terminalf(bkv1.ReasonMoveNotAllowed,
		"ObjectStore %q serves the very bucket %q this claim lives in on ObjectStore %q: a move there would copy the bucket onto itself; nothing was changed",
		t.store.Name, t.bucket, scope.store.Name)
}

// sameEndpoint says whether two store endpoints are one URL, up to case, a default
// port and a trailing slash.
func sameEndpoint(a, b string) bool {
	return normalEndpoint(a) == normalEndpoint(b)
}

func normalEndpoint(endpoint string) string {
	u, err := url.Parse(strings.TrimSpace(endpoint))
	if err != nil || u.Host == "" {
		return strings.ToLower(strings.TrimRight(endpoint, "/"))
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host + strings.TrimRight(u.EscapedPath(), "/")
}
