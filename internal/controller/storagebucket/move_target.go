package storagebucket

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// moveTargetScope is the target of a move: its store, a client of it, and the bucket
// there (the name it has on the source, or the target's lane name: move_name.go).
type moveTargetScope struct {
	store  *bkv1.ObjectStore
	s3     s3.Client
	bucket string
	region string
}

// moveTarget checks that the move may go where the spec says, with the target store's
// guardrails in full, as for a new bucket there (its name lanes and prefix too, by the
// name the bucket keeps or the lane name it takes: checkMoveTargetName), and the
// source's say on moves out. Nothing is sent to either store.
func (r *Reconciler) moveTarget(ctx context.Context, scope *bucketScope, m *bkv1.MoveStatus) (*moveTargetScope, error) {
	sb := scope.sb
	if scope.store.Spec.Guardrails.Moves.OutOf == bkv1.MoveForbidden {
		return nil, reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "ObjectStore %q forbids moving buckets out of it (guardrails.moves.outOf)", scope.store.Name)
	}
	target, err := r.usableStore(ctx, sb, m.To)
	if err != nil {
		return nil, err
	}
	if target.Spec.Guardrails.Moves.Into == bkv1.MoveForbidden {
		return nil, reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "ObjectStore %q forbids moving buckets into it (guardrails.moves.into)", target.Name)
	}
	c, region, err := r.bucketClient(ctx, sb, target)
	if err != nil {
		return nil, err
	}
	// dest too: a retirement's choice for a name the target refuses (moveNameChoice).
	there := &bucketScope{sb: sb, store: target, s3: c, bucket: scope.bucket, region: region, owner: scope.owner, dest: scope.dest}
	refusal, err := r.checkMoveTargetName(ctx, there, m)
	if err != nil {
		return nil, err
	}
	if refusal != nil {
		return nil, reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "ObjectStore %q refuses the bucket (%s): %s; nothing was created there", target.Name, refusal.Reason, refusal.Message)
	}
	t := &moveTargetScope{store: target, s3: c, bucket: there.bucket, region: region}
	if err := refuseSameEndpoint(scope, t); err != nil {
		return nil, err
	}
	if _, err := moverCaps(scope.store, target); err != nil {
		return nil, err
	}
	return t, nil
}

// ensureMoveTarget makes the target bucket this claim's before any object is copied:
// created (with object lock and the source's lock configuration, if the bucket has
// it: move_lock.go) and tagged, or found tagged as
// this claim's (on a store an earlier move left, that bucket, thawed and no longer
// tagged as moved: see reclaimMovedBucket); with versioning Enabled where every
// version is copied or the claim asks for it. The rest of the configuration is
// applied by the configuration step of the first pass on the new home, before its
// connection Secret names it; what the spec does not declare and the move carries
// (spec.move.undeclaredSettings: Carry) is applied here, before any object is copied
// (carryUndeclared).
//
// A bucket the move did not create is never taken: one tagged as another's, one an
// answer to its CreateBucket says was there already (createMoveTarget), and one
// without tags that holds anything (freshMoveTarget).
func (r *Reconciler) ensureMoveTarget(ctx context.Context, scope *bucketScope, t *moveTargetScope, m *bkv1.MoveStatus) error {
	sb := scope.sb
	if v, ok := r.moveTargets.Load(m.ID); ok && v == t.bucket {
		return nil
	}
	lock, err := moveLock(ctx, scope, t)
	if err != nil {
		return err
	}
	defer r.names.lock(t.store.Spec.Endpoint + "\x00" + t.bucket)()
	tags, err := headBucket(ctx, t.s3, t.bucket)
	switch s3.KindOf(err) {
	case s3.KindNotFound:
		// Recorded before the create, as status.createIntent is: an untagged bucket
		// found after a crash is this move's only if its status says so.
		sentBefore := m.TargetBucket == t.bucket // by an earlier pass, maybe an earlier process
		m.TargetBucket = t.bucket
		if err := scope.patcher.WriteNow(ctx); err != nil {
			return fmt.Errorf("recording the move's target bucket: %w", err)
		}
		// The write read the claim back from the API server into a status.move of its
		// own: what this pass goes on to record (a refusal below, the pass's progress)
		// is m's, so m is the claim's status.move again.
		sb.Status.Move = m
		if err := r.createMoveTarget(ctx, t, m, moveTargetCreator(t, lock), sentBefore); err != nil {
			return err
		}
		// Read, not taken for granted: Ceph RGW answers its owner's CreateBucket of a
		// bucket that exists already as it answers a new one.
		if tags, err = t.s3.GetBucketTagging(ctx, t.bucket); err != nil {
			return reconcile.AsStepError(err, fmt.Sprintf("reading the tags of bucket %q on ObjectStore %q", t.bucket, t.store.Name))
		}
	case s3.KindAccessDenied:
		return reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "bucket %q exists on ObjectStore %q and belongs to another account", t.bucket, t.store.Name)
	default:
		if err != nil {
			return reconcile.AsStepError(err, fmt.Sprintf("checking bucket %q on ObjectStore %q", t.bucket, t.store.Name))
		}
		if tags == nil {
			if tags, err = t.s3.GetBucketTagging(ctx, t.bucket); err != nil {
				return reconcile.AsStepError(err, fmt.Sprintf("reading the tags of bucket %q on ObjectStore %q", t.bucket, t.store.Name))
			}
		}
	}
	switch scope.owner.of(tags, false) {
	case ownedByUs:
		if m.TargetBucket != t.bucket { // found, not made by this move: maybe the source itself
			if err := r.refuseSameBucket(ctx, scope, t, m, tags); err != nil {
				return err
			}
			tags = maps.Clone(tags)
			delete(tags, bkv1.TagMoveProbe) // taken off by refuseSameBucket
		}
		if err := reclaimMovedBucket(ctx, t.s3, t.bucket, tags); err != nil {
			return err
		}
	case unowned:
		if m.TargetBucket != t.bucket {
			return reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "bucket %q already exists on ObjectStore %q and is not this claim's: a move never writes into it", t.bucket, t.store.Name)
		}
		if err := freshMoveTarget(ctx, t, m); err != nil {
			return err
		}
		want := withoutSystemTags(tags)
		maps.Copy(want, sb.Spec.Tags)
		maps.Copy(want, scope.owner.tags())
		if err := t.s3.PutBucketTagging(ctx, t.bucket, want); err != nil {
			return reconcile.AsStepError(err, fmt.Sprintf("tagging bucket %q on ObjectStore %q", t.bucket, t.store.Name))
		}
	default:
		m.TargetBucket = "" // not this move's: never touched, by an abort neither
		return reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "bucket %q on ObjectStore %q belongs to another StorageBucket or cluster: a move never writes into it", t.bucket, t.store.Name)
	}
	if copiesVersions(scope) || desiredVersioning(sb) == s3.VersioningEnabled {
		if err := t.s3.PutBucketVersioning(ctx, t.bucket, s3.VersioningEnabled); err != nil {
			return reconcile.AsStepError(err, fmt.Sprintf("enabling versioning on bucket %q of ObjectStore %q", t.bucket, t.store.Name))
		}
	}
	if err := applyMoveLock(ctx, t, lock); err != nil {
		return err
	}
	if err := carryUndeclared(ctx, scope, t, m); err != nil {
		return err
	}
	r.moveTargets.Store(m.ID, t.bucket)
	r.moveCreates.Delete(m.ID) // tagged: a create landing late can take nothing from it
	return nil
}

// copiesVersions says whether the move copies every version and delete marker: asked
// for by the claim's spec.move or by the retirement that moves it, or a bucket with
// object lock, whose every version a lock may keep.
func copiesVersions(scope *bucketScope) bool {
	sb := scope.sb
	return sb.Spec.Move != nil && sb.Spec.Move.Versions == bkv1.MoveVersionsAll || scope.dest.allVersions || hasObjectLock(sb)
}

// removeMoveTarget empties and deletes the bucket an unfinished move made on its
// target (done says it is gone). Only a bucket tagged as this claim's, or the
// untagged one status.move says the move created, is touched.
func (r *Reconciler) removeMoveTarget(ctx context.Context, sb *bkv1.StorageBucket, m *bkv1.MoveStatus) (bool, error) {
	if m.TargetBucket == "" {
		return true, nil // the move created nothing
	}
	store := &bkv1.ObjectStore{}
	if err := r.Get(ctx, types.NamespacedName{Name: m.To}, store); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil // gone with its store
		}
		return false, err
	}
	c, _, err := r.bucketClient(ctx, sb, store)
	if err != nil {
		return false, err
	}
	done, err := r.removeBucketOf(ctx, sb, store, c, m.TargetBucket, m.ID)
	if done {
		r.moveTargets.Delete(m.ID)
	}
	return done, err
}

// removeBucketOf removes the target bucket of a move cancelled before its cutover (key
// names it in this process's memory) as every bucket of a claim's that is not its home
// is removed (removeCopy): only a bucket tagged as this claim's, or the untagged one the
// move recorded creating while it is empty, is touched, a purge's pass at a time; done
// says it is gone and stays gone. Versions an object lock keeps there are waited for,
// nothing being sent to the store before the first unlocks: the error says what keeps
// them, for the move's message.
func (r *Reconciler) removeBucketOf(ctx context.Context, sb *bkv1.StorageBucket, store *bkv1.ObjectStore, c s3.Client, bucket, key string) (bool, error) {
	removal, err := r.removeCopy(ctx, sb, nil, bucketCopy{store: store, c: c, bucket: bucket, key: key,
		what: "the target of a cancelled move", why: "the cancelled move", recorded: true})
	if err == nil && removal.locked != "" {
		err = &reconcile.StepError{Reason: bkv1.ReasonDeletionBlocked, Message: removal.locked}
	}
	return removal.done, err
}

// moverPass is the pass the move is at, for the mover: both buckets and both stores'
// credentials, which travel beside the Spec, never in it.
func (r *Reconciler) moverPass(ctx context.Context, scope *bucketScope, t *moveTargetScope, m *bkv1.MoveStatus, mode mover.Mode) (mover.Move, error) {
	spec := mover.Spec{
		MoveID: m.ID, Mode: mode, Pass: int(m.Pass), Boundaries: m.Boundaries, Versions: mover.VersionsCurrent,
		Source:      r.moverBucket(scope.store, scope.bucket, scope.region),
		Target:      r.moverBucket(t.store, t.bucket, t.region),
		Parallelism: moverParallelism(scope.store, t.store),
		ObjectLock:  moverLockRules(scope.sb, t.store),
	}
	if copiesVersions(scope) {
		spec.Versions = mover.VersionsAll
	}
	if mode == mover.ModePlan {
		spec.Shards, spec.Boundaries = defaults.MoveShards, nil
	}
	src, err := r.moverCredentials(ctx, scope.store)
	if err != nil {
		return mover.Move{}, err
	}
	tgt, err := r.moverCredentials(ctx, t.store)
	if err != nil {
		return mover.Move{}, err
	}
	caps, err := moverCaps(scope.store, t.store)
	if err != nil {
		return mover.Move{}, err
	}
	return mover.Move{Spec: spec, Source: src, Target: tgt, Caps: caps}, nil
}

// minMoverMemory is defaults.MoverMinMemory as a quantity.
var minMoverMemory = resource.NewQuantity(defaults.MoverMinMemory, resource.BinarySI)

// moverCaps are the store admins' caps on a mover pod: the smaller of the two stores'
// guardrails.moves.maxMoverCPU and maxMoverMemory. A memory cap too small for a
// mover refuses the move rather than have its pods killed over and over.
func moverCaps(stores ...*bkv1.ObjectStore) (corev1.ResourceList, error) {
	caps := corev1.ResourceList{}
	for _, s := range stores {
		g := s.Spec.Guardrails.Moves
		for name, q := range map[corev1.ResourceName]*resource.Quantity{corev1.ResourceCPU: g.MaxMoverCPU, corev1.ResourceMemory: g.MaxMoverMemory} {
			if q == nil {
				continue
			}
			if have, ok := caps[name]; !ok || q.Cmp(have) < 0 {
				caps[name] = q.DeepCopy()
			}
		}
		if m := g.MaxMoverMemory; m != nil && m.Cmp(*minMoverMemory) < 0 {
			return nil, reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "ObjectStore %q caps mover memory at %s (guardrails.moves.maxMoverMemory), below the %s a mover needs", s.Name, m, minMoverMemory)
		}
	}
	return caps, nil
}

// moverParallelism is the store admins' bound on a move's running shards: the smaller
// of the two stores' guardrails.moves.maxParallelism (zero: neither sets one).
func moverParallelism(stores ...*bkv1.ObjectStore) int {
	n := 0
	for _, s := range stores {
		if p := s.Spec.Guardrails.Moves.MaxParallelism; p != nil && (n == 0 || int(*p) < n) {
			n = int(*p)
		}
	}
	return n
}

// moverBucket is one side of a move as the mover reaches it, with the move's share of
// the store's request budget: the moves running on the store share MoveShareOfBudget
// of it, each an equal part of its bound (move_queue.go), whose every shard and pod
// draw on it together.
func (r *Reconciler) moverBucket(store *bkv1.ObjectStore, bucket, region string) mover.Bucket {
	perSecond, burst := r.Stores.Budget(store)
	b := mover.Bucket{
		Endpoint: store.Spec.Endpoint, Region: region, ForcePathStyle: store.Spec.ForcePathStyle,
		CABundle: store.Spec.CABundle, InsecureSkipTLSVerify: store.Spec.InsecureSkipTLSVerify, Bucket: bucket,
	}
	if perSecond > 0 {
		share := defaults.MoveShareOfBudget / float64(r.moveBound(store))
		b.RequestsPerSecond = perSecond * share
		b.Burst = max(1, int(float64(burst)*share))
	}
	return b
}

// moverCredentials are the operator's own keys of store, for its mover.
func (r *Reconciler) moverCredentials(ctx context.Context, store *bkv1.ObjectStore) (mover.Credentials, error) {
	ref := store.Spec.CredentialsSecretRef
	if ref == nil {
		return mover.Credentials{}, nil // the SDK's default chain
	}
	secret, err := r.Stores.SecretData(ctx, ref)
	if err != nil {
		return mover.Credentials{}, err
	}
	return mover.Credentials{
		AccessKeyID:     string(secret.Data[bkv1.CredentialsKeyAccessKeyID]),
		SecretAccessKey: string(secret.Data[bkv1.CredentialsKeySecretAccessKey]),
		SessionToken:    string(secret.Data[bkv1.CredentialsKeySessionToken]),
	}, nil
}
