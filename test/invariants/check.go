package invariants

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// Invariant names one rule of the checker (see the package comment).
type Invariant string

// The invariants, and Unreadable: a read the checker could not make, which is never
// taken for a pass.
const (
	BucketOwned       Invariant = "BucketOwned"
	ClaimBound        Invariant = "ClaimBound"
	IdentityGranted   Invariant = "IdentityGranted"
	SecretOwned       Invariant = "SecretOwned"
	DeletionExplained Invariant = "DeletionExplained"
	MoverOwned        Invariant = "MoverOwned"
	CopyAccounted     Invariant = "CopyAccounted"
	Unreadable        Invariant = "Unreadable"
)

// Violation is one breach: which invariant, of which object ("bucket
// <store>/<name>", "user <store>/<name>", "secret <namespace>/<name>",
// "storagebucket <namespace>/<name>", ...) and what was found. It never holds a
// secret value.
type Violation struct {
	Invariant Invariant
	Object    string
	Found     string
}

func (v Violation) String() string { return fmt.Sprintf("%s: %s: %s", v.Invariant, v.Object, v.Found) }

// StoreView is one store as its admin sees it, under the name of the ObjectStore that
// points at it. A server behind several ObjectStores is viewed once, under one of them.
type StoreView struct {
	// Name is the ObjectStore's name.
	Name string
	// S3 lists the store's buckets and reads their tags, with credentials that see
	// every bucket the operator's do (the operator's own, or the store admin's).
	S3 s3.Client
	// IAM reads the store's IAM users; nil when the ObjectStore issues no IAM keys.
	IAM IAMReader
	// Foreign, when set, says the store holds no bucket of the operator's without its
	// ownership tags but those it names (the harness's own): every other bucket that
	// carries no cluster tag is then one the operator made and never tagged, or whose
	// tags it removed, and must be named by a live claim's status or create intent.
	// Nil on a store shared with anything else: untagged buckets are not judged.
	Foreign func(bucket string) bool
}

// Check reads the cluster through c (read it uncached: the API server, not an
// informer) and every store, and returns every breach of the invariants, sorted.
// clusterID is the operator's --cluster-id (by default the kube-system namespace's
// UID): buckets and users of other clusters sharing a store are none of its business.
// Call it once the system has settled; in between, a claim being created or a key
// being rotated is, for a moment, a breach.
func Check(ctx context.Context, c client.Reader, stores []StoreView, clusterID string, opts ...Option) []Violation {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var out []Violation
	snap, err := readCluster(ctx, c, o)
	if err != nil {
		return []Violation{{Invariant: Unreadable, Object: "cluster", Found: err.Error()}}
	}
	for _, view := range stores {
		out = append(out, checkBuckets(ctx, snap, view, clusterID, o)...)
		if view.IAM != nil {
			out = append(out, checkIdentities(ctx, snap, view, clusterID)...)
		}
	}
	out = append(out, checkSecrets(snap)...)
	out = append(out, checkDeletions(snap)...)
	out = append(out, checkMovers(snap, o.moverNamespace)...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Invariant != out[j].Invariant {
			return out[i].Invariant < out[j].Invariant
		}
		return out[i].Object < out[j].Object
	})
	return out
}

// Option tells Check what only its caller can know.
type Option func(*options)

type options struct {
	retained       func(claimUID types.UID) bool
	moverNamespace string
}

// MoverNamespace is the namespace the operator's movers keep a move's Jobs, Secrets and
// ConfigMaps in (--mover-namespace, by default the operator's own): MoverOwned is held
// over it. Without it, MoverOwned is not judged.
func MoverNamespace(namespace string) Option {
	return func(o *options) { o.moverNamespace = namespace }
}

// Retained names the StorageBuckets, by UID, whose deletion may leave their bucket as
// it was: those deleted with deletionPolicy Retain, which never blocks (when the store
// cannot be reached the claim goes without the bucket being marked released), and
// those whose finalizer the tenant removed, so that the operator never saw the claim go.
// Such a bucket keeps the gone claim's UID and its namespace's in its uid tag, which the
// operator takes for released when a claim of the same namespace and name comes again,
// so it is no breach when retained says true for that UID. Only the caller knows: the
// cluster keeps no trace of a deleted object's policy. A gone claim's bucket that
// retained does not name (deleted with Delete or Purge) is still a leak.
func Retained(retained func(claimUID types.UID) bool) Option {
	return func(o *options) { o.retained = retained }
}

// snapshot is what the checker knows of the cluster, read once per Check.
type snapshot struct {
	buckets     []bkv1.StorageBucket
	accesses    []bkv1.BucketAccess
	secrets     []corev1.Secret
	stores      map[string]*bkv1.ObjectStore
	namespaces  map[string]*corev1.Namespace
	bucketByUID map[types.UID]*bkv1.StorageBucket
	bucketByKey map[types.NamespacedName]*bkv1.StorageBucket
	accessByUID map[types.UID]*bkv1.BucketAccess
	// moves are the movers' objects in the mover namespace, by move ID (nil when the
	// caller named no namespace).
	moves map[string]*mover.Leftovers
}

func readCluster(ctx context.Context, c client.Reader, o options) (*snapshot, error) {
	sbs := &bkv1.StorageBucketList{}
	bas := &bkv1.BucketAccessList{}
	oss := &bkv1.ObjectStoreList{}
	nss := &corev1.NamespaceList{}
	secrets := &corev1.SecretList{}
	lists := []struct {
		what string
		list client.ObjectList
		opts []client.ListOption
	}{
		{"StorageBuckets", sbs, nil},
		{"BucketAccesses", bas, nil},
		{"ObjectStores", oss, nil},
		{"Namespaces", nss, nil},
		{"Secrets", secrets, []client.ListOption{client.MatchingLabels{bkv1.LabelManagedBy: bkv1.LabelManagedByValue}}},
	}
	for _, l := range lists {
		if err := c.List(ctx, l.list, l.opts...); err != nil {
			return nil, fmt.Errorf("listing %s: %w", l.what, err)
		}
	}
	s := &snapshot{
		buckets: sbs.Items, accesses: bas.Items, secrets: secrets.Items,
		stores: map[string]*bkv1.ObjectStore{}, namespaces: map[string]*corev1.Namespace{},
		bucketByUID: map[types.UID]*bkv1.StorageBucket{}, bucketByKey: map[types.NamespacedName]*bkv1.StorageBucket{},
		accessByUID: map[types.UID]*bkv1.BucketAccess{},
	}
	for i := range oss.Items {
		s.stores[oss.Items[i].Name] = &oss.Items[i]
	}
	for i := range nss.Items {
		s.namespaces[nss.Items[i].Name] = &nss.Items[i]
	}
	for i := range s.buckets {
		sb := &s.buckets[i]
		s.bucketByUID[sb.UID] = sb
		s.bucketByKey[types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}] = sb
	}
	for i := range s.accesses {
		s.accessByUID[s.accesses[i].UID] = &s.accesses[i]
	}
	if o.moverNamespace != "" {
		moves, err := mover.ListMoves(ctx, c, o.moverNamespace)
		if err != nil {
			return nil, err
		}
		s.moves = moves
	}
	return s, nil
}

func unreadable(object string, err error) Violation {
	return Violation{Invariant: Unreadable, Object: object, Found: err.Error()}
}
