package bucketaccess

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// This file keeps an issued key within what the access grants now. Grants name buckets
// by name: a policy left naming a bucket the spec no longer grants, or one that is not
// Ready, reaches whoever holds that name next (a recycled namespace creating the same
// StorageBucket, another tenant choosing the name, an adoption). So the identity is
// narrowed first, and only then does the access wait for anything.

// narrowThenWait narrows the identity to ready, the Ready grants on store (the one
// store the spec's buckets are on), and then reports why the access waits.
func (r *Reconciler) narrowThenWait(ctx context.Context, ba *bkv1.BucketAccess, store string, ready []iam.Grant, why *reconcile.StepError) error {
	if err := r.narrowIdentity(ctx, ba, store, ready); err != nil {
		return err
	}
	return why
}

// leaveStore takes every bucket from the identity on the store the access was issued
// on, which its buckets are no longer on: its key there reaches nothing from now on
// (the access collector deletes the user), and what status says of that key is of the
// store left. With both stores in one IAM account this is the same user, whose policy
// the identity step writes again at once; its key is kept.
func (r *Reconciler) leaveStore(ctx context.Context, ba *bkv1.BucketAccess, store string) error {
	if err := r.narrowIdentity(ctx, ba, store, nil); err != nil {
		return err
	}
	ba.Status.AccessKeyID, ba.Status.KeyCreatedAt, ba.Status.RoleARN = "", nil, ""
	ba.Status.Rotation = bkv1.RotationStatus{LastHandledRequest: ba.Status.Rotation.LastHandledRequest}
	return nil
}

// narrowIdentity sets the policy of the identity on the store its key was issued on
// (status.objectStore) to ready when that is still the buckets' store, and to nothing
// (the policy deleted) when they are now elsewhere. It never creates a user nor touches
// a key, so the key works again as soon as its buckets are Ready. What this process
// wrote last is remembered, so a waiting access costs one call per change, not one per
// reconcile.
func (r *Reconciler) narrowIdentity(ctx context.Context, ba *bkv1.BucketAccess, store string, ready []iam.Grant) error {
	issuedOn := ba.Status.ObjectStore
	if issuedOn == "" {
		return nil // nothing issued (or its status lost: the access collector's case)
	}
	var grants []iam.Grant
	if issuedOn == store {
		grants = ready
	}
	doc := ""
	if len(grants) > 0 {
		var err error
		if doc, err = policyMemo(grants); err != nil {
			return reconcile.Terminalf(bkv1.ReasonConfigFailed, "%v", err)
		}
	}
	want := issuedOn + "\n" + doc
	if r.appliedOf(ba.UID) == want {
		return nil
	}
	st := &bkv1.ObjectStore{}
	if err := r.Get(ctx, types.NamespacedName{Name: issuedOn}, st); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // the store went with everything on it
		}
		return err
	}
	if stores.AccessProviderOf(st) != bkv1.AccessProviderIAM {
		return nil // the store issues no keys of its own any more: none to narrow
	}
	driver, err := r.Access.DriverFor(ctx, st)
	if err != nil {
		return err
	}
	user := accessIdentity(r.ClusterID, ba)
	if keyless(ba) {
		err = narrowRole(ctx, driver, user, grants)
	} else if len(grants) == 0 {
		err = driver.DeletePolicy(ctx, user)
	} else if err = driver.PutPolicy(ctx, user, grants); iam.KindOf(err) == iam.KindNoSuchEntity {
		err = nil // no user: nothing to narrow
	}
	if err != nil {
		return fmt.Errorf("narrowing the policy of %s on store %s: %w", user, issuedOn, err)
	}
	r.setApplied(ba.UID, want)
	reach := "no bucket"
	if len(grants) > 0 {
		var names []string
		for _, g := range grants {
			names = append(names, g.Bucket)
		}
		reach = "only " + strings.Join(names, ", ")
	}
	what := "the keys of " + user
	if keyless(ba) {
		what = "the sessions of role " + user
	}
	r.Recorder.Eventf(ba, nil, corev1.EventTypeNormal, bkv1.ReasonRevoking, "Narrow",
		"%s on store %s now reach %s: the access grants no other Ready bucket there", what, issuedOn, reach)
	return nil
}

// narrowRole is narrowIdentity for a keyless access's role: its inline policy set to
// grants, or deleted for none, which takes the buckets from its sessions already
// issued too (on the stores that check a session's role on each request; on the
// others a session keeps them until it expires, which maxSessionDuration bounds). A
// missing role has nothing to narrow.
func narrowRole(ctx context.Context, driver iam.Driver, role string, grants []iam.Grant) error {
	roles, ok := iam.RolesOf(driver)
	if !ok {
		return nil // no role operations: no role of ours
	}
	if len(grants) == 0 {
		return roles.DeleteRolePolicy(ctx, role)
	}
	if err := roles.PutRolePolicy(ctx, role, grants); iam.KindOf(err) != iam.KindNoSuchEntity {
		return err
	}
	return nil
}

// mayHoldIdentity says whether the access may have a user (or, keyless, a role) on the
// store its status names: a key or role was recorded, a key is being verified, or this
// process wrote its policy.
func (r *Reconciler) mayHoldIdentity(ba *bkv1.BucketAccess) bool {
	if ba.Status.ObjectStore == "" {
		return false
	}
	if ba.Status.AccessKeyID != "" || ba.Status.RoleARN != "" || r.pendingOf(ba.UID) != nil {
		return true
	}
	store, _, _ := strings.Cut(r.appliedOf(ba.UID), "\n")
	return store == ba.Status.ObjectStore
}

// policyMemo is what the applied memory records of grants: their document, and the
// buckets a move's cutover freezes, whose Deny only the stores whose bucket policies
// bind no key render (iam.MinIOPolicyDocument): a freeze or thaw is written again.
func policyMemo(grants []iam.Grant) (string, error) {
	doc, err := iam.PolicyDocument(grants)
	for _, g := range grants {
		if g.Frozen {
			doc += "\nfrozen " + g.Bucket
		}
	}
	return doc, err
}

func (r *Reconciler) appliedOf(uid types.UID) string {
	applied, _ := r.applied.Get(uid)
	return applied
}

func (r *Reconciler) setApplied(uid types.UID, applied string) { r.applied.Set(uid, applied) }
