package storagebucket

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// The cutover stops the source's writes with a statement of its bucket policy that
// denies every principal the object writes (MoveFreezeSid). A bucket policy, not the
// keys' IAM policies: it is one call, it holds for every key at once (the connection
// Secret's application credentials, every BucketAccess's key or role, keys issued
// while it is in place), and the stores hold even the bucket's owner to an explicit
// Deny, so nothing writes around it. Reads go on, so applications keep serving. MinIO
// applies bucket policies to anonymous requests only: there the keys the operator
// issued are frozen too (move_freezer.go).

// freezeActions are the object writes the freeze denies: PutObject covers
// CreateMultipartUpload, UploadPart and CompleteMultipartUpload. The keys' own
// policies deny the same where bucket policies bind no key (move_freezer.go).
var freezeActions = iam.FreezeActions

// holdWritesForMove keeps the freeze in the policy the configuration step applies to
// the home bucket while its move cuts over, so that correcting drift never lifts it.
// A bucket whose policy the operator does not manage (an adopted bucket with none in
// the spec and none set before: its own policy is left as it is; one a move carried
// there, status.carried) is left to the freeze
// the move puts and lifts itself.
func (r *Reconciler) holdWritesForMove(_ context.Context, scope *bucketScope) error {
	sb, m := scope.sb, scope.sb.Status.Move
	if m == nil || m.Phase != bkv1.MoveCuttingOver || m.From != scope.store.Name {
		return nil
	}
	managed := managedConfigOf(sb, scope.bucket)
	if scope.policy == "" && !managed.ownsPolicy() {
		return nil
	}
	doc, err := withFreeze(scope.policy, scope.bucket)
	if err != nil {
		return err
	}
	scope.policy = doc
	return nil
}

// freezeSource adds the freeze to the source bucket's policy as the store has it.
func (r *Reconciler) freezeSource(ctx context.Context, scope *bucketScope) error {
	return freezeBucket(ctx, scope.s3, scope.bucket)
}

// freezeBucket adds the freeze to bucket's policy as the store has it.
func freezeBucket(ctx context.Context, c s3.Client, bucket string) error {
	current, err := c.GetBucketPolicy(ctx, bucket)
	if err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("reading the policy of bucket %q to stop its writes", bucket))
	}
	doc, err := withFreeze(current, bucket)
	if err != nil {
		return err
	}
	if doc == current {
		return nil
	}
	if err := c.PutBucketPolicy(ctx, bucket, doc); err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("stopping the writes of bucket %q", bucket))
	}
	return nil
}

// thawBucket removes the freeze from bucket's policy, leaving the rest: the source of a
// move cancelled or stuck after its cutover, one deleted after the move, or one a
// move comes back into (reclaimMovedBucket).
func thawBucket(ctx context.Context, c s3.Client, bucket string) error {
	current, err := c.GetBucketPolicy(ctx, bucket)
	if err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("reading the policy of bucket %q to allow its writes again", bucket))
	}
	doc, empty, err := withoutFreeze(current)
	if err != nil {
		return err
	}
	switch {
	case doc == current:
		return nil
	case empty:
		err = c.DeleteBucketPolicy(ctx, bucket)
	default:
		err = c.PutBucketPolicy(ctx, bucket, doc)
	}
	if err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("allowing the writes of bucket %q again", bucket))
	}
	return nil
}

// reclaimMovedBucket readies a bucket of this claim's that a move finds on its target
// (the bucket an earlier move left on the store this one goes back to) before anything
// is copied into it: that move's freeze is lifted, as the stores hold even their owner
// to it, so neither the mover nor, after the switch, the applications could write; and
// its moved-to tag goes, as the bucket is to be the claim's home again. tags are the
// bucket's tags as read.
func reclaimMovedBucket(ctx context.Context, c s3.Client, bucket string, tags map[string]string) error {
	if err := thawBucket(ctx, c, bucket); err != nil {
		return err
	}
	if _, moved := tags[bkv1.TagMovedTo]; !moved {
		return nil
	}
	kept := maps.Clone(tags)
	delete(kept, bkv1.TagMovedTo)
	if err := c.PutBucketTagging(ctx, bucket, kept); err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("removing the %s tag of bucket %q", bkv1.TagMovedTo, bucket))
	}
	return nil
}

// refreezeLeftBehind puts back what reclaimMovedBucket took from the copy an earlier
// move left on the target, when the move back into it is cancelled: its freeze, and
// its moved-to tag naming where the bucket still lives. What the cancelled move
// copied into it stays; the copy stays in status.leftBehind for the claim's deletion.
// The bucket's tags are read first: a bucket of its name that is not this claim's (the
// copy deleted and the name taken since) is neither frozen nor tagged. bucket is the
// copy's name there (status.leftBehind), which a move that renamed the bucket since
// made differ from the name it has at home.
func (r *Reconciler) refreezeLeftBehind(ctx context.Context, scope *bucketScope, m *bkv1.MoveStatus, bucket string) error {
	store := &bkv1.ObjectStore{}
	if err := r.Get(ctx, types.NamespacedName{Name: m.To}, store); err != nil {
		return client.IgnoreNotFound(err) // gone with its store
	}
	c, _, err := r.bucketClient(ctx, scope.sb, store)
	if err != nil {
		return err
	}
	tags, ours, err := r.ourBucket(ctx, scope.sb, c, bucket)
	if err != nil || !ours {
		return err
	}
	if err := freezeBucket(ctx, c, bucket); err != nil {
		return err
	}
	return tagMovedTo(ctx, c, bucket, tags, m.From+"/"+scope.bucket)
}

// markSourceMoved tags the bucket left on the source store with where it went. Its
// freeze stays: no key writes to it again.
func (r *Reconciler) markSourceMoved(ctx context.Context, scope *bucketScope, m *bkv1.MoveStatus) error {
	store := &bkv1.ObjectStore{}
	if err := r.Get(ctx, types.NamespacedName{Name: m.From}, store); err != nil {
		return err
	}
	c, _, err := r.bucketClient(ctx, scope.sb, store)
	if err != nil {
		return err
	}
	source := sourceBucketOf(scope.sb, m) // its name there, before a move that renamed it
	tags, err := c.GetBucketTagging(ctx, source)
	if s3.KindOf(err) == s3.KindNotFound {
		return nil // removed by someone since: nothing to mark
	}
	if err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("reading the tags of the source bucket %q", source))
	}
	return tagMovedTo(ctx, c, source, tags, m.To+"/"+scope.bucket)
}

// tagMovedTo adds the moved-to tag saying where the bucket went (want: store/bucket) to
// its tags as read, unless they say so already.
func tagMovedTo(ctx context.Context, c s3.Client, bucket string, tags map[string]string, want string) error {
	if tags[bkv1.TagMovedTo] == want {
		return nil
	}
	tags = maps.Clone(tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[bkv1.TagMovedTo] = want
	if err := c.PutBucketTagging(ctx, bucket, tags); err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("tagging the source bucket %q as moved", bucket))
	}
	return nil
}

// policyDoc is a bucket policy read loosely: only the statements are looked at, and
// every other key is kept as it was.
type policyDoc map[string]any

func parsePolicyDoc(doc string) (policyDoc, []any, error) {
	p := policyDoc{}
	if doc == "" {
		return policyDoc{"Version": "2012-10-17"}, nil, nil
	}
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		return nil, nil, reconcile.Terminalf(bkv1.ReasonConfigFailed, "the bucket's policy is not JSON the move can add its freeze to: %v", err)
	}
	var statements []any
	switch st := p["Statement"].(type) {
	case []any:
		statements = st
	case map[string]any:
		statements = []any{st}
	}
	return p, statements, nil
}

func isFreeze(st any) bool {
	m, ok := st.(map[string]any)
	return ok && m["Sid"] == bkv1.MoveFreezeSid
}

// withFreeze is doc with the freeze statement for bucket, once.
func withFreeze(doc, bucket string) (string, error) {
	p, statements, err := parsePolicyDoc(doc)
	if err != nil {
		return "", err
	}
	statements = slices.DeleteFunc(statements, isFreeze)
	statements = append(statements, map[string]any{
		"Sid": bkv1.MoveFreezeSid, "Effect": "Deny", "Principal": "*",
		"Action": freezeActions, "Resource": []string{"arn:aws:s3:::" + bucket + "/*"},
	})
	p["Statement"] = statements
	out, err := json.Marshal(p)
	return string(out), err
}

// withoutFreeze is doc without the freeze statement; empty says no statement is left.
func withoutFreeze(doc string) (string, bool, error) {
	if doc == "" {
		return "", true, nil
	}
	p, statements, err := parsePolicyDoc(doc)
	if err != nil {
		return "", false, err
	}
	kept := slices.DeleteFunc(slices.Clone(statements), isFreeze)
	if len(kept) == len(statements) {
		return doc, false, nil
	}
	p["Statement"] = kept
	out, err := json.Marshal(p)
	return string(out), len(kept) == 0, err
}
