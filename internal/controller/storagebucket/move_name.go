package storagebucket

import (
	"context"
	"fmt"
	"slices"
	"strings"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// A move creates the bucket on its target under a name the target accepts as it would
// for a bucket a claim creates there (checkMoveName): the name the bucket has, where it
// lies in the namespace's lane, or is one of the target's
// guardrails.legacyBucketNames for the namespace. Otherwise the claim's choice decides
// (spec.move.bucketName, else its retirement's): Keep refuses the move before anything
// is created, Lane moves the bucket under the name a new claim would get in the
// target's lane (laneName), which no other claim can hold: it is derived from this
// claim's namespace and name, with a hash of both, in a lane only its namespace may
// create in, and a bucket of that name that is not this claim's is never written into
// (ensureMoveTarget). Which name it is depends on the specs alone, never on what the
// target holds, so the refusal reads the same whether or not a bucket of either name
// exists there. Once the move recorded its target bucket (status.move.targetBucket),
// the name is that one for the rest of the move.

// moveNameChoice is the choice that applies to the claim's move for a name its target
// refuses: its own spec.move.bucketName, else the retirement's that moves it, else
// Keep; where says where to set Lane, for the refusal's message.
func moveNameChoice(scope *bucketScope) (choice bkv1.MoveBucketName, where string) {
	sb := scope.sb
	if sb.Spec.Move != nil && sb.Spec.Move.BucketName != "" {
		return sb.Spec.Move.BucketName, "spec.move.bucketName"
	}
	where = "spec.move.bucketName"
	if d := scope.dest; d.retirement != nil {
		if d.bucketName != "" {
			return d.bucketName, where
		}
		where += fmt.Sprintf(" (or ObjectStore %s's spec.retire.bucketName)", d.retirement.From)
	}
	return bkv1.MoveBucketNameKeep, where
}

// laneName is the name a new claim of the same namespace and name would get on store:
// its derived name there, in its namespace's lane.
func laneName(store *bkv1.ObjectStore, sb *bkv1.StorageBucket) string {
	return naming.BucketName(store.Spec.BucketNamePrefix, sb.Namespace, sb.Name)
}

// checkMoveTargetName holds there (the target, under there.bucket) to the target's
// guardrails, its say on locked buckets and its names, and picks the name: the one the
// move recorded, else the bucket's own, else, under Lane, the lane name. there.bucket is
// the name picked. Nothing is sent to the target.
func (r *Reconciler) checkMoveTargetName(ctx context.Context, there *bucketScope, m *bkv1.MoveStatus) (*reconcile.StepError, error) {
	if m.TargetBucket != "" {
		there.bucket = m.TargetBucket
		return r.checkMoveTarget(ctx, there)
	}
	refusal, err := r.checkMoveTarget(ctx, there)
	if err != nil || refusal == nil || refusal.Reason != bkv1.ReasonBucketNameNotAllowed {
		return refusal, err
	}
	choice, where := moveNameChoice(there)
	lane := laneName(there.store, there.sb)
	if choice != bkv1.MoveBucketNameLane || lane == there.bucket {
		refusal.Message += fmt.Sprintf("; the platform team may list it in the target's guardrails.legacyBucketNames for namespace %q, or %s: Lane moves the bucket under the name %q (its Secrets follow)", there.sb.Namespace, where, lane)
		return refusal, nil
	}
	there.bucket = lane
	return r.checkMoveTarget(ctx, there)
}

// checkMoveTarget is the target's verdict on the bucket under there.bucket.
func (r *Reconciler) checkMoveTarget(ctx context.Context, there *bucketScope) (*reconcile.StepError, error) {
	if refusal := checkGuardrails(there); refusal != nil {
		return refusal, nil
	}
	if refusal := checkMoveLock(there.sb, there.store); refusal != nil {
		return refusal, nil
	}
	return r.checkMoveName(ctx, there)
}

// keptLegacyName says whether the claim keeps a name outside store's lanes and prefix
// that the store's guardrails.legacyBucketNames allow its namespace: only a bucket the
// claim holds already (a move brings it), never one a claim would create.
func keptLegacyName(sb *bkv1.StorageBucket, store *bkv1.ObjectStore, name string) bool {
	return holdsBucket(sb, name) && store.Spec.Guardrails.LegacyNameAllowed(sb.Namespace, name)
}

// sourceBucketOf is the name the bucket had on the store the move m took it from: its
// name before a move that renamed it (status.move.sourceBucket), else the one it has.
func sourceBucketOf(sb *bkv1.StorageBucket, m *bkv1.MoveStatus) string {
	if m != nil && m.SourceBucket != "" {
		return m.SourceBucket
	}
	return knownBucket(sb)
}

// status.leftBehind lists the copies finished moves left on their old homes: a store's
// name where the copy is named as the bucket is now (status.bucketName), else
// "<store>/<bucket>" (a move renamed the bucket since). Store names hold no '/'.

// leftBehindCopy is one copy a move left behind: its store and its name.
type leftBehindCopy struct{ store, bucket string }

// parseLeftBehind reads an entry of status.leftBehind, home being the bucket's name now.
func parseLeftBehind(entry, home string) leftBehindCopy {
	if store, bucket, ok := strings.Cut(entry, "/"); ok {
		return leftBehindCopy{store, bucket}
	}
	return leftBehindCopy{entry, home}
}

// entry writes c as an entry of status.leftBehind, home being the bucket's name now.
func (c leftBehindCopy) entry(home string) string {
	if c.bucket == home {
		return c.store
	}
	return c.store + "/" + c.bucket
}

// leftBehindAfter is the list of copies left behind once a move from from (where the
// bucket was named fromBucket) to to is done, home being the bucket's name now: the
// copy on from joins it, and the one on to named home, the bucket's home again, leaves
// it.
func leftBehindAfter(list []string, home, from, fromBucket, to string) []string {
	out := slices.DeleteFunc(slices.Clone(list), func(e string) bool {
		c := parseLeftBehind(e, home)
		return c == (leftBehindCopy{to, home}) || c == (leftBehindCopy{from, fromBucket})
	})
	return append(out, leftBehindCopy{from, fromBucket}.entry(home))
}

// renameLeftBehind writes the entries of list, written against the bucket's name
// oldName, against newName: what a move that renames the bucket does at its cutover.
func renameLeftBehind(list []string, oldName, newName string) []string {
	var out []string
	for _, e := range list {
		out = append(out, parseLeftBehind(e, oldName).entry(newName))
	}
	return out
}

// withoutLeftBehind drops the copy on store named bucket from list (home being the
// bucket's name now).
func withoutLeftBehind(list []string, store, bucket, home string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(e string) bool {
		return parseLeftBehind(e, home) == leftBehindCopy{store, bucket}
	})
}

// leftBehindOn are the copies of list on store (home being the bucket's name now).
func leftBehindOn(list []string, store, home string) []leftBehindCopy {
	var out []leftBehindCopy
	for _, e := range list {
		if c := parseLeftBehind(e, home); c.store == store {
			out = append(out, c)
		}
	}
	return out
}
