package invariants

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// checkIdentities holds IdentityGranted over the IAM users of one store.
func checkIdentities(ctx context.Context, snap *snapshot, view StoreView, clusterID string) []Violation {
	users, err := view.IAM.Users(ctx)
	if err != nil {
		return []Violation{unreadable("store "+view.Name, fmt.Errorf("listing IAM users: %w", err))}
	}
	byUser := map[string]*bkv1.BucketAccess{}
	for i := range snap.accesses {
		ba := &snap.accesses[i]
		byUser[iam.UserName(clusterID, string(ba.UID))] = ba
		if legacy := iam.LegacyUserName(clusterID, string(ba.UID)); legacy != "" && ba.Status.IdentityName == legacy {
			byUser[legacy] = ba
		}
	}
	out := checkRoles(ctx, snap, view, clusterID)
	for _, user := range users {
		ba := byUser[user]
		if ba == nil && !iam.OwnedUserName(clusterID, user) {
			continue // not this cluster's
		}
		object := "user " + view.Name + "/" + user
		keys, err := view.IAM.Keys(ctx, user)
		if errors.Is(err, ErrNoSuchUser) {
			continue // deleted since the listing
		}
		if err != nil {
			out = append(out, unreadable(object, fmt.Errorf("listing keys: %w", err)))
			continue
		}
		policies, err := view.IAM.Policies(ctx, user)
		if errors.Is(err, ErrNoSuchUser) {
			continue
		}
		if err != nil {
			out = append(out, unreadable(object, fmt.Errorf("reading policies: %w", err)))
			continue
		}
		for _, found := range judgeIdentity(snap, view.Name, ba, keys, policies) {
			out = append(out, Violation{Invariant: IdentityGranted, Object: object, Found: found})
		}
	}
	return out
}

// judgeIdentity says what is wrong with one of this cluster's users on store, whose
// access (nil when none) is ba.
func judgeIdentity(snap *snapshot, store string, ba *bkv1.BucketAccess, keys []string, policies map[string]string) []string {
	held := fmt.Sprintf("%d key(s), policies %v", len(keys), policyNames(policies))
	if ba == nil {
		return []string{"belongs to no live BucketAccess; holds " + held}
	}
	access := "BucketAccess " + ba.Namespace + "/" + ba.Name
	if !ba.DeletionTimestamp.IsZero() {
		return []string{access + " is being deleted, and its user still holds " + held}
	}
	grantedOn, grants := grantsNow(snap, ba)
	if grantedOn != store {
		if len(keys) == 0 && len(policies) == 0 {
			return []string{fmt.Sprintf("%s grants nothing on this store (its grant is on %q), and its user is still here", access, grantedOn)}
		}
		return []string{fmt.Sprintf("%s grants nothing on this store (its grant is on %q), and its user still holds %s", access, grantedOn, held)}
	}
	var found []string
	valid := []string{ba.Status.AccessKeyID, ba.Status.Rotation.PreviousKeyID}
	for _, k := range keys {
		if k == "" || !slices.Contains(valid, k) {
			found = append(found, fmt.Sprintf("key %s is not among the keys %s's status names", k, access))
		}
	}
	if beyond, err := reachBeyond(policies, grants); err != nil {
		found = append(found, err.Error())
	} else if len(beyond) > 0 {
		found = append(found, fmt.Sprintf("reaches beyond what %s grants now (%s): %s", access, describeGrants(grants), strings.Join(beyond, ", ")))
	}
	return found
}

// grantsNow is the store an access's spec is on and the grants it makes there now: for
// each of its StorageBuckets that is Ready with a bucket on a store admitting its
// namespace, that bucket in the grant's mode. store is "" when the spec grants nowhere
// (a StorageBucket missing, being deleted or refused by a guardrail, or buckets on
// several stores), as the access collector judges it.
func grantsNow(snap *snapshot, ba *bkv1.BucketAccess) (store string, grants []iam.Grant) {
	for _, g := range ba.Spec.Buckets {
		sb := snap.bucketByKey[types.NamespacedName{Namespace: ba.Namespace, Name: g.Name}]
		if sb == nil || !sb.DeletionTimestamp.IsZero() || guardrailRefused(sb) {
			return "", nil
		}
		switch {
		case store == "":
			store = sb.HomeStore()
		case store != sb.HomeStore():
			return "", nil
		}
		if !reconcile.ConditionIsTrue(sb.Status.Conditions, bkv1.ConditionReady) || sb.Status.BucketName == "" || !snap.admits(store, sb.Namespace) {
			continue
		}
		mode := iam.ReadWrite
		if g.Mode == bkv1.AccessReadOnly {
			mode = iam.ReadOnly
		}
		grants = append(grants, iam.Grant{Bucket: sb.Status.BucketName, Mode: mode})
	}
	return store, grants
}

func guardrailRefused(sb *bkv1.StorageBucket) bool {
	c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionTrue && reconcile.IsGuardrailRefusal(c.Reason)
}

// admits says whether the ObjectStore named store exists and its allowedNamespaces
// selects the namespace.
func (s *snapshot) admits(store, namespace string) bool {
	os, ns := s.stores[store], s.namespaces[namespace]
	if os == nil || ns == nil {
		return false
	}
	if os.Spec.AllowedNamespaces == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(os.Spec.AllowedNamespaces)
	return err == nil && sel.Matches(labels.Set(ns.Labels))
}

// reachBeyond lists what the policies allow that the grants do not: "<action> on
// <resource>" pairs. The operator's own policy for the grants (iam.PolicyDocument)
// is accepted as it is (awspolicyequivalence, as the operator compares); anything
// else is read statement by statement.
func reachBeyond(policies map[string]string, grants []iam.Grant) ([]string, error) {
	var permitted map[string]bool
	if len(grants) > 0 {
		want, err := iam.PolicyDocument(grants)
		if err != nil {
			return nil, err
		}
		if doc, ok := policies[iam.PolicyName]; ok && len(policies) == 1 {
			if same, err := s3.EquivalentPolicies(doc, want); err == nil && same {
				return nil, nil
			}
		}
		if permitted, _, err = reach(want); err != nil {
			return nil, err
		}
	}
	var beyond []string
	for _, name := range policyNames(policies) {
		allowed, denies, err := reach(policies[name])
		if err != nil {
			return nil, fmt.Errorf("policy %s cannot be read: %v", name, err)
		}
		if denies {
			beyond = append(beyond, "policy "+name+" has a Deny statement, which the operator never writes")
		}
		for _, pair := range sortedKeys(allowed) {
			if !permitted[pair] {
				beyond = append(beyond, pair+" (policy "+name+")")
			}
		}
	}
	return beyond, nil
}

func describeGrants(grants []iam.Grant) string {
	if len(grants) == 0 {
		return "nothing"
	}
	var parts []string
	for _, g := range grants {
		parts = append(parts, g.Bucket+" "+string(g.Mode))
	}
	return strings.Join(parts, ", ")
}

func policyNames(policies map[string]string) []string { return sortedKeys(policies) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkRoles holds IdentityGranted over the IAM roles of one store, where its reader
// reads them: every role of this cluster (the operator makes one per keyless
// BucketAccess, named as it names users) belongs to a live keyless BucketAccess whose
// spec grants on this store, or whose status records this very role (one IAM account
// behind two stores).
func checkRoles(ctx context.Context, snap *snapshot, view StoreView, clusterID string) []Violation {
	reader, ok := view.IAM.(RoleReader)
	if !ok {
		return nil
	}
	roles, err := reader.Roles(ctx)
	if errors.Is(err, ErrNoRoles) {
		return nil
	}
	if err != nil {
		return []Violation{unreadable("store "+view.Name, fmt.Errorf("listing IAM roles: %w", err))}
	}
	byName := map[string]*bkv1.BucketAccess{}
	for i := range snap.accesses {
		ba := &snap.accesses[i]
		byName[iam.UserName(clusterID, string(ba.UID))] = ba
	}
	var out []Violation
	for _, role := range roles {
		ba := byName[role]
		if ba == nil && !iam.OwnedUserName(clusterID, role) {
			continue // not this cluster's
		}
		if found := judgeRole(snap, view.Name, role, ba); found != "" {
			out = append(out, Violation{Invariant: IdentityGranted, Object: "role " + view.Name + "/" + role, Found: found})
		}
	}
	return out
}

// judgeRole says what is wrong with one of this cluster's roles on store, whose access
// (nil when none) is ba ("" if nothing).
func judgeRole(snap *snapshot, store, role string, ba *bkv1.BucketAccess) string {
	if ba == nil {
		return "belongs to no live BucketAccess"
	}
	access := "BucketAccess " + ba.Namespace + "/" + ba.Name
	grantedOn, _ := grantsNow(snap, ba)
	switch {
	case !ba.DeletionTimestamp.IsZero():
		return access + " is being deleted, and its role is still here"
	case ba.Spec.ServiceAccountName == "":
		return access + " asks for a key, not a role, and the role is still here"
	case grantedOn == store:
		return ""
	case ba.Status.RoleARN != "" && strings.HasSuffix(ba.Status.RoleARN, "/"+role):
		return "" // the same role, seen through another store of its account
	}
	return fmt.Sprintf("%s grants nothing on this store (its grant is on %q), and its role is still here", access, grantedOn)
}
