package bucketaccess

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// This file decides, for one IAM user listed on one store, whether the collector may
// delete it. The decision is a pure function of the user's name, the store and what
// the API server says of the cluster's BucketAccesses and StorageBuckets, so it can be
// tested as a table (orphans_test.go); collector.go feeds it.

// userVerdict is what the collector does with one listed user.
type userVerdict int

const (
	// verdictNotOurs: the name is not of this cluster's form and hashes from none
	// of its accesses. Never touched, whatever else it is.
	verdictNotOurs userVerdict = iota
	// verdictInUse: the user's access grants on this store.
	verdictInUse
	// verdictCheckKeys: the access's key was issued on another store. This user is
	// in use only if it holds that key (both stores then share one IAM account, and
	// it is the same user); otherwise it is a leftover on a store the access left.
	verdictCheckKeys
	// verdictOrphan: ours, and no BucketAccess of the cluster has this user.
	verdictOrphan
	// verdictAccessDeleting: the access is being deleted (with or without our
	// finalizer).
	verdictAccessDeleting
	// verdictNoGrant: the access exists but grants nowhere: a bucket it names is
	// missing, being deleted or refused by its store's guardrails, or its buckets
	// are on several stores.
	verdictNoGrant
	// verdictMovedAway: verdictCheckKeys, and the user holds none of the access's
	// keys.
	verdictMovedAway
	// verdictLeft: the access names buckets on another store (one that may not even
	// exist), not all of them Ready, and holds no key there: nothing is being issued
	// there, so this user is what it left behind, with the policy of its old buckets
	// unless the controller already narrowed it. Grants name buckets, so it goes now,
	// not once the access is issued elsewhere (which a bucket that never becomes Ready
	// would put off for ever).
	verdictLeft
	// verdictIssuing: the access's buckets are all Ready on another store and its
	// status records no key there: its key may be being issued there right now. This
	// user is then that same user when both stores share one IAM account, or one the
	// controller left without a policy when it moved on. It stays while it holds no
	// key, or a key the user of that name on the other store holds too (one account);
	// otherwise it goes (verdictMovedAway).
	verdictIssuing
)

// revokes says whether the verdict deletes the user.
func (v userVerdict) revokes() bool {
	switch v {
	case verdictOrphan, verdictAccessDeleting, verdictNoGrant, verdictMovedAway, verdictLeft:
		return true
	}
	return false
}

func (v userVerdict) String() string {
	return [...]string{"not ours", "in use", "check keys", "no BucketAccess has it",
		"its BucketAccess is being deleted", "its BucketAccess grants nowhere", "its BucketAccess moved to another store",
		"its BucketAccess names buckets on another store and left this one", "its BucketAccess is issued on another store"}[v]
}

// accessFacts is what the collector needs to know of one BucketAccess.
type accessFacts struct {
	uid      types.UID
	key      types.NamespacedName
	deleting bool
	// store is the one ObjectStore all buckets of the spec are on and usable; ""
	// when the spec grants nowhere (see verdictNoGrant).
	store string
	// ready: every bucket of the spec is Ready, as the controller requires to issue a
	// key.
	ready bool
	// issuedOn and keyIDs say where the access's key was last issued (or is being
	// issued) and which keys it uses (current and, during a grace period, previous),
	// as its status records them. Status may lag a rotation, but a key only goes after its grace, once status
	// names its successor; and a listed user holding one of these keys is the
	// access's own user whatever else status says, since key ids are unique in an
	// account.
	issuedOn string
	keyIDs   []string
	// keyless: the access asks for a role (spec.serviceAccountName), and roleARN is
	// the one its status records.
	keyless bool
	roleARN string
}

// accessIndex maps the user names of the cluster's accesses to what is known of them.
type accessIndex struct {
	clusterID string
	// byUser is keyed by each access's identity (accessIdentity).
	byUser map[string]*accessFacts
	// otherNames holds the names that hash from an access's uid without being its
	// identity (the legacy form of an access issued under the new one): ours, and
	// unused.
	otherNames map[string]*accessFacts
}

// newAccessIndex indexes accesses; buckets are the StorageBuckets of their
// namespaces (any others are ignored).
func newAccessIndex(clusterID string, accesses []bkv1.BucketAccess, buckets []bkv1.StorageBucket) *accessIndex {
	byName := make(map[types.NamespacedName]*bkv1.StorageBucket, len(buckets))
	for i := range buckets {
		byName[types.NamespacedName{Namespace: buckets[i].Namespace, Name: buckets[i].Name}] = &buckets[i]
	}
	x := &accessIndex{clusterID: clusterID, byUser: make(map[string]*accessFacts, len(accesses)), otherNames: map[string]*accessFacts{}}
	for i := range accesses {
		ba := &accesses[i]
		f := &accessFacts{
			uid:      ba.UID,
			key:      types.NamespacedName{Namespace: ba.Namespace, Name: ba.Name},
			deleting: !ba.DeletionTimestamp.IsZero(),
			store:    grantedStore(ba, byName),
			ready:    allReady(ba, byName),
		}
		f.issuedOn = ba.Status.ObjectStore
		f.keyless, f.roleARN = keyless(ba), ba.Status.RoleARN
		if ba.Status.ObjectStore != "" && ba.Status.AccessKeyID != "" {
			f.keyIDs = []string{ba.Status.AccessKeyID}
			if ba.Status.Rotation.PreviousKeyID != "" {
				f.keyIDs = append(f.keyIDs, ba.Status.Rotation.PreviousKeyID)
			}
		}
		identity := accessIdentity(clusterID, ba)
		x.byUser[identity] = f
		for _, name := range []string{iam.UserName(clusterID, string(ba.UID)), iam.LegacyUserName(clusterID, string(ba.UID))} {
			if name != "" && name != identity {
				x.otherNames[name] = f
			}
		}
	}
	return x
}

// grantedStore is the store every bucket of the access's spec is on, or "" when
// the spec grants nowhere. Readiness short of a guardrail refusal does not matter
// here: on that store the controller narrows the user's policy to the Ready buckets,
// and keeps its key.
func grantedStore(ba *bkv1.BucketAccess, buckets map[types.NamespacedName]*bkv1.StorageBucket) string {
	store := ""
	for _, g := range ba.Spec.Buckets {
		sb := buckets[types.NamespacedName{Namespace: ba.Namespace, Name: g.Name}]
		if sb == nil || !sb.DeletionTimestamp.IsZero() || guardrailRefusal(sb) != "" {
			return ""
		}
		switch {
		case store == "":
			store = sb.HomeStore()
		case store != sb.HomeStore():
			return ""
		}
	}
	return store
}

// allReady says whether every bucket of the access's spec is Ready (and named), as
// the controller's resolveBuckets requires before it issues a key.
func allReady(ba *bkv1.BucketAccess, buckets map[types.NamespacedName]*bkv1.StorageBucket) bool {
	for _, g := range ba.Spec.Buckets {
		sb := buckets[types.NamespacedName{Namespace: ba.Namespace, Name: g.Name}]
		if sb == nil || sb.Status.BucketName == "" || !reconcile.ConditionIsTrue(sb.Status.Conditions, bkv1.ConditionReady) {
			return false
		}
	}
	return true
}

// judge decides on the user named user, listed on store. remembered holds legacy
// names this collector has seen belong to an access earlier: the legacy form names
// no cluster, so once its access is gone only that memory knows it is ours.
func (x *accessIndex) judge(user, store string, remembered map[string]types.UID) (userVerdict, *accessFacts) {
	if f := x.byUser[user]; f != nil {
		switch {
		case f.deleting:
			return verdictAccessDeleting, f
		case f.store == "":
			return verdictNoGrant, f
		case f.store == store:
			return verdictInUse, f
		case f.issuedOn == f.store && len(f.keyIDs) > 0:
			return verdictCheckKeys, f
		case f.ready:
			return verdictIssuing, f
		default:
			return verdictLeft, f
		}
	}
	if f := x.otherNames[user]; f != nil {
		return verdictOrphan, f
	}
	if _, ok := remembered[user]; ok || iam.OwnedUserName(x.clusterID, user) {
		return verdictOrphan, nil
	}
	return verdictNotOurs, nil
}

// holdsAccessKey settles verdictCheckKeys: the user listed keys holds one the
// access uses.
func holdsAccessKey(f *accessFacts, keys []iam.AccessKey) bool {
	for _, k := range keys {
		for _, id := range f.keyIDs {
			if k.ID == id {
				return true
			}
		}
	}
	return false
}

// guardrailRefusal is the guardrail reason (guardrailReasons) a StorageBucket is
// Stalled with, or "": the store's guardrails, or its admin, no longer let the bucket
// be used as it is, so its accesses' keys are revoked. Other failures (not yet
// Ready, store unreachable) leave keys as they are.
func guardrailRefusal(sb *bkv1.StorageBucket) string {
	c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue || !reconcile.IsGuardrailRefusal(c.Reason) {
		return ""
	}
	return c.Reason
}
