package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// ownership is how a bucket's tags relate to one StorageBucket.
type ownership int

const (
	// unowned: no bucketkeeper tags at all.
	unowned ownership = iota
	// ownedByUs: tagged with this claim and this object's UID.
	ownedByUs
	// released: tagged with this cluster and this claim, but not with a live UID: a
	// Retain deletion dropped the UID tag, or a claim was deleted without releasing
	// (store unreachable, abandoned). A namespace/name is held by one object at a time
	// in a cluster, so the UID it names belongs to no live claim, and this claim — the
	// same cluster, namespace and name — may bind it again.
	released
	// ownedByOther: tagged for another claim, or for this claim by an operator that
	// wrote no cluster tag and another UID (which cluster it came from is unknown).
	ownedByOther
	// otherCluster: tagged by another cluster's operator sharing the store: never
	// touched, re-bound or purged.
	otherCluster
)

// owner identifies a StorageBucket across clusters: what its tags must say.
type owner struct {
	claim   string
	uid     types.UID
	cluster string
}

func (r *StorageBucketReconciler) ownerOf(sb *bkv1.StorageBucket) owner {
	return owner{claim: claimTag(sb.Namespace, sb.Name), uid: sb.UID, cluster: r.ClusterID}
}

// tags are the tags that make a bucket this claim's.
func (o owner) tags() map[string]string {
	tags := map[string]string{bkv1.TagClaim: o.claim, bkv1.TagUID: string(o.uid)}
	if o.cluster != "" {
		tags[bkv1.TagCluster] = o.cluster
	}
	return tags
}

// releasedTags are the tags of a retained bucket: the claim and cluster stay, so the
// same cluster's claim of the same namespace and name binds it again; the UID goes.
func (o owner) releasedTags() map[string]string {
	tags := o.tags()
	delete(tags, bkv1.TagUID)
	return tags
}

// of classifies a bucket's tags for this owner.
func (o owner) of(tags map[string]string) ownership {
	claim, uid, cluster := tags[bkv1.TagClaim], tags[bkv1.TagUID], tags[bkv1.TagCluster]
	switch {
	case claim == "" && uid == "" && cluster == "":
		return unowned
	case cluster != "" && cluster != o.cluster:
		return otherCluster
	case claim != o.claim:
		return ownedByOther
	case uid == string(o.uid):
		return ownedByUs // a UID is unique across clusters: ours even without a cluster tag
	case cluster == o.cluster:
		return released
	default:
		return ownedByOther // no cluster tag (written before they existed): whose it is cannot be known
	}
}

// claimOf names a claim for people: namespace/name.
func claimOf(sb *bkv1.StorageBucket) string { return sb.Namespace + "/" + sb.Name }

// claimTag is the claim tag's value: namespace/name, shortened with a hash of the whole
// when it would pass S3's 256-character limit (a namespace has up to 63 characters, a
// name up to 253). The hash keeps two long names with a common start apart.
func claimTag(namespace, name string) string {
	claim := namespace + "/" + name
	if len(claim) <= bkv1.MaxTagValueLength {
		return claim
	}
	sum := sha256.Sum256([]byte(claim))
	hash := hex.EncodeToString(sum[:])[:16]
	return claim[:bkv1.MaxTagValueLength-len(hash)-1] + "-" + hash
}

// withoutSystemTags drops the tags the store sets itself (aws:...): they cannot be
// written back, and a PutBucketTagging that names them fails.
func withoutSystemTags(tags map[string]string) map[string]string {
	out := maps.Clone(tags)
	if out == nil {
		out = map[string]string{}
	}
	maps.DeleteFunc(out, func(k, _ string) bool { return strings.HasPrefix(k, bkv1.SystemTagPrefix) })
	return out
}
