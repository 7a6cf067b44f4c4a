package invariants

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// checkBuckets holds BucketOwned over the store's buckets and ClaimBound over the
// Ready claims on it.
func checkBuckets(ctx context.Context, snap *snapshot, view StoreView, clusterID string, o options) []Violation {
	names, err := view.S3.ListBuckets(ctx)
	if err != nil {
		return []Violation{unreadable("store "+view.Name, fmt.Errorf("listing buckets: %w", err))}
	}
	var out []Violation
	// owner maps each bucket to the UID its uid tag names ("" when released or not ours).
	owner := map[string]types.UID{}
	for _, name := range names {
		object := "bucket " + view.Name + "/" + name
		tags, err := view.S3.GetBucketTagging(ctx, name)
		if s3.KindOf(err) == s3.KindNotFound {
			continue // deleted since the listing
		}
		if err != nil {
			out = append(out, unreadable(object, fmt.Errorf("reading tags: %w", err)))
			continue
		}
		if tags[bkv1.TagCluster] != clusterID {
			if v := untagged(snap, view, name, tags); v != "" {
				out = append(out, Violation{Invariant: BucketOwned, Object: object, Found: v})
			}
			continue // another cluster's, or no operator's
		}
		claimUID, _, _ := strings.Cut(tags[bkv1.TagUID], "/")
		owner[name] = types.UID(claimUID)
		if v := bucketOwned(snap, view.Name, name, tags, types.UID(claimUID), o); v != "" {
			out = append(out, Violation{Invariant: BucketOwned, Object: object, Found: v})
		}
		if claimUID == "" {
			continue // released: frozen or moved, it is no claim's any more
		}
		policy, err := view.S3.GetBucketPolicy(ctx, name)
		switch {
		case s3.KindOf(err) == s3.KindNotFound:
		case err != nil:
			out = append(out, unreadable(object, fmt.Errorf("reading the policy: %w", err)))
		default:
			if v := copyAccounted(snap, view.Name, tags, claimUID, policy); v != "" {
				out = append(out, Violation{Invariant: CopyAccounted, Object: object, Found: v})
			}
		}
	}
	for i := range snap.buckets {
		sb := &snap.buckets[i]
		if sb.HomeStore() != view.Name || !sb.DeletionTimestamp.IsZero() ||
			!reconcile.ConditionIsTrue(sb.Status.Conditions, bkv1.ConditionReady) || sb.Status.BucketName == "" {
			continue
		}
		uid, found := owner[sb.Status.BucketName]
		switch {
		case !found:
			out = append(out, Violation{Invariant: ClaimBound, Object: claimObject(sb),
				Found: fmt.Sprintf("Ready, but its bucket %s is not on store %s tagged with this cluster", sb.Status.BucketName, view.Name)})
		case uid != sb.UID:
			out = append(out, Violation{Invariant: ClaimBound, Object: claimObject(sb),
				Found: fmt.Sprintf("Ready, but its bucket %s is tagged for uid %q, not this claim's %s", sb.Status.BucketName, uid, sb.UID)})
		}
	}
	return out
}

// bucketOwned says what is wrong with a bucket tagged by this cluster ("" if nothing):
// its uid tag must name no claim (released), a gone claim that kept it (Retained) or a
// live one, of the namespace and name its claim tag says, on this store, which
// holds no other bucket.
func bucketOwned(snap *snapshot, store, bucket string, tags map[string]string, claimUID types.UID, o options) string {
	if claimUID == "" {
		return "" // released by a Retain deletion
	}
	sb := snap.bucketByUID[claimUID]
	if sb == nil {
		if o.retained != nil && o.retained(claimUID) {
			return "" // retained by policy, or abandoned by its tenant: not marked released
		}
		return fmt.Sprintf("tagged for claim %s (uid %s), which no longer exists, and not released (uid tag %q)",
			tags[bkv1.TagClaim], claimUID, tags[bkv1.TagUID])
	}
	if claim := sb.Namespace + "/" + sb.Name; len(claim) <= bkv1.MaxTagValueLength && tags[bkv1.TagClaim] != claim {
		return fmt.Sprintf("uid tag names live claim %s but its claim tag says %q", claim, tags[bkv1.TagClaim])
	}
	if !holdsACopy(sb, store) {
		return fmt.Sprintf("tagged for claim %s/%s, whose store is %s, not %s", sb.Namespace, sb.Name, sb.HomeStore(), store)
	}
	if known := knownBucket(sb); known != "" && known != bucket {
		return fmt.Sprintf("tagged for claim %s/%s, which holds bucket %s: one claim, two buckets", sb.Namespace, sb.Name, known)
	}
	return ""
}

// untagged says what is wrong with a bucket without this cluster's tag ("" if
// nothing): on a store whose view knows its foreign buckets, a bucket with no ownership
// tag at all that is not foreign was made by the operator, and unless a live claim on
// the store records it (created, not yet tagged) nobody will ever delete or bind it.
func untagged(snap *snapshot, view StoreView, bucket string, tags map[string]string) string {
	if view.Foreign == nil || view.Foreign(bucket) || tags[bkv1.TagCluster] != "" || tags[bkv1.TagClaim] != "" || tags[bkv1.TagUID] != "" {
		return ""
	}
	for i := range snap.buckets {
		sb := &snap.buckets[i]
		if knownBucket(sb) == bucket && (sb.HomeStore() == view.Name || movingTo(sb) == view.Name || keptOn(sb) == view.Name) {
			return ""
		}
	}
	return "has no ownership tags and no live claim records it: made by the operator, and left to no one"
}

// holdsACopy says whether a claim's bucket may be on store: the store it lives on, the
// store it moves to (the target, made and tagged before the copy), the store a
// cancelled move keeps its target on for a while (status.move.targetKeptOn), or an
// old home a finished move left a frozen copy on (status.leftBehind).
func holdsACopy(sb *bkv1.StorageBucket, store string) bool {
	return store == sb.HomeStore() || store == movingTo(sb) || store == keptOn(sb) || slices.Contains(sb.Status.LeftBehind, store)
}

// keptOn is the store a cancelled move keeps its target bucket on, "" for none.
func keptOn(sb *bkv1.StorageBucket) string {
	if m := sb.Status.Move; m.KeptTarget() {
		return m.TargetKeptOn
	}
	return ""
}

// movingTo is the store a claim's bucket moves to, "" when it does not move: its
// unfinished move's target (a retirement's too, which the spec does not name), or the
// store its spec names before that move starts.
func movingTo(sb *bkv1.StorageBucket) string {
	if m := sb.Status.Move; !m.Terminal() {
		return m.To
	}
	if want := sb.Spec.ObjectStoreRef.Name; want != sb.HomeStore() {
		return want
	}
	return ""
}

// knownBucket is the bucket a claim recorded, in status or in its create intent.
func knownBucket(sb *bkv1.StorageBucket) string {
	if sb.Status.BucketName != "" {
		return sb.Status.BucketName
	}
	if in := sb.Status.CreateIntent; in != nil && in.UID == sb.UID {
		return in.BucketName
	}
	return ""
}

func claimObject(sb *bkv1.StorageBucket) string {
	return "storagebucket " + sb.Namespace + "/" + sb.Name
}
