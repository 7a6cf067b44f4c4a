package storagebucket

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// owner identifies a StorageBucket across clusters and namespace incarnations: what its
// tags must say.
type owner struct {
	claim string
	uid   types.UID
	// namespace is the UID of the claim's namespace: a namespace deleted and made
	// again under the same name is another namespace, and a bucket retained from the
	// first is not the second's to re-bind. Empty when it could not be read.
	namespace types.UID
	cluster   string
}

// ownerOf is the owner sb's tags must name. The namespace comes from the cache, as the
// namespace selectors do; namespaces are cluster-scoped and tenants cannot write them.
func (r *Reconciler) ownerOf(ctx context.Context, sb *bkv1.StorageBucket) (owner, error) {
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: sb.Namespace}, ns); err != nil && !apierrors.IsNotFound(err) {
		return owner{}, err
	}
	return r.ownerIn(sb, ns.UID), nil
}

// ownerIn is the owner of sb in the namespace with the given UID.
func (r *Reconciler) ownerIn(sb *bkv1.StorageBucket, namespace types.UID) owner {
	return owner{claim: claimTag(sb.Namespace, sb.Name), uid: sb.UID, namespace: namespace, cluster: r.ClusterID}
}

// tags are the tags that make a bucket this claim's.
func (o owner) tags() map[string]string {
	tags := map[string]string{bkv1.TagClaim: o.claim, bkv1.TagUID: uidTag(o.uid, o.namespace)}
	if o.cluster != "" {
		tags[bkv1.TagCluster] = o.cluster
	}
	return tags
}

// releasedTags are the tags of a retained bucket: the claim, the namespace's UID and the
// cluster stay, so the same cluster's claim of the same namespace and name binds it
// again; the claim's UID goes.
func (o owner) releasedTags() map[string]string {
	tags := o.tags()
	tags[bkv1.TagUID] = uidTag("", o.namespace)
	if o.namespace == "" {
		delete(tags, bkv1.TagUID)
	}
	return tags
}

// uidTag is the uid tag's value: "<claim UID>/<namespace UID>". Kubernetes UIDs have no
// "/"; a tag written before namespace UIDs were recorded is the claim's UID alone.
func uidTag(claim, namespace types.UID) string {
	if namespace == "" {
		return string(claim)
	}
	return string(claim) + "/" + string(namespace)
}

// parseUIDTag splits a uid tag into the claim's and the namespace's UID; known is false
// for a tag that records no namespace.
func parseUIDTag(v string) (claim, namespace types.UID, known bool) {
	c, ns, found := strings.Cut(v, "/")
	return types.UID(c), types.UID(ns), found && ns != ""
}

// of classifies a bucket's tags for this owner. anyIncarnation (the store's
// guardrails.allowRebindToRecreatedNamespace) lets a released bucket of another
// incarnation of the namespace, or of an unknown one, count as released.
func (o owner) of(tags map[string]string, anyIncarnation bool) ownership {
	claim, uid, cluster := tags[bkv1.TagClaim], tags[bkv1.TagUID], tags[bkv1.TagCluster]
	claimUID, namespace, namespaceKnown := parseUIDTag(uid)
	switch {
	case claim == "" && uid == "" && cluster == "":
		return unowned
	case cluster != "" && cluster != o.cluster:
		return otherCluster
	case claim != o.claim:
		return ownedByOther
	case claimUID != "" && claimUID == o.uid:
		return ownedByUs // a UID is unique across clusters: ours even without a cluster tag
	case cluster != o.cluster:
		return ownedByOther // no cluster tag (written before they existed): whose it is cannot be known
	case namespaceKnown && namespace == o.namespace && o.namespace != "":
		return released
	case anyIncarnation:
		return released
	default:
		// Retained from another incarnation of the namespace, or before namespace
		// UIDs were recorded: not this namespace's unless the store admin allows it.
		return ownedByOther
	}
}

// recordsNamespace says whether the tags name the namespace's UID as o would write it:
// a bucket bound before namespace UIDs were recorded is tagged again.
func (o owner) recordsNamespace(tags map[string]string) bool {
	return o.namespace == "" || tags[bkv1.TagUID] == uidTag(o.uid, o.namespace)
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
