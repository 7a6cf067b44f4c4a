package bucketaccess

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// This file is keyless access: a BucketAccess that names a ServiceAccount
// (spec.serviceAccountName) gets, instead of a user and a key, a role on its buckets'
// store whose trust policy admits only that ServiceAccount's tokens, of the issuer the
// store registered (status.webIdentity of its ObjectStore), for the store's audience,
// and whose inline policy is the one a user for the same grants carries. The Secret
// holds no key: what an AWS SDK's default credential chain needs to exchange the
// Pod's projected token for a session of the role. The role has the access's user
// name (accessIdentity), so the collector judges roles as it judges users.

// keyless says whether the access asks for a role instead of a key.
func keyless(ba *bkv1.BucketAccess) bool { return ba.Spec.ServiceAccountName != "" }

// storeTrust is what a keyless access needs of its store: the registration its
// ObjectStore made, current for the store's spec. Anything else is why the access
// waits (or, where the store cannot do it, is refused); nothing is sent to the store.
func storeTrust(store *bkv1.ObjectStore) (*bkv1.WebIdentity, *bkv1.WebIdentityStatus, *reconcile.StepError) {
	p := store.Spec.AccessProvider
	if p == nil || p.WebIdentity == nil || stores.AccessProviderOf(store) != bkv1.AccessProviderIAM {
		return nil, nil, reconcile.Terminalf(bkv1.ReasonWebIdentityNotConfigured,
			"ObjectStore %q does not trust ServiceAccount tokens: its spec.accessProvider.webIdentity is not set; ask its admin, or use a key (no serviceAccountName)", store.Name)
	}
	w, st := p.WebIdentity, store.Status.WebIdentity
	c := reconcile.FindCondition(store.Status.Conditions, bkv1.ConditionWebIdentityReady)
	switch {
	case c != nil && c.Status == metav1.ConditionFalse && c.Reason == bkv1.ReasonNotSupportedByStore:
		return nil, nil, reconcile.Terminalf(bkv1.ReasonNotSupportedByStore, "ObjectStore %q cannot give roles to ServiceAccounts: %s", store.Name, c.Message)
	case c != nil && c.Status == metav1.ConditionFalse && c.Reason == bkv1.ReasonIssuerShared:
		return nil, nil, reconcile.Terminalf(bkv1.ReasonIssuerShared,
			"ObjectStore %q does not trust ServiceAccount tokens: its issuer is shared with another cluster (%s); the role is revoked, and made again once the store trusts the issuer again", store.Name, c.Message)
	case c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != store.Generation ||
		st == nil || st.ProviderARN == "" || st.Issuer != w.Issuer || st.Audience != w.Audience:
		why := "not checked yet"
		if c != nil && c.Status != metav1.ConditionTrue {
			why = c.Reason + ": " + c.Message
		}
		return nil, nil, reconcile.Waitingf(bkv1.ReasonWebIdentityNotReady, "ObjectStore %q does not trust the cluster's ServiceAccount tokens yet (%s)", store.Name, why)
	}
	return w, st, nil
}

// roleOf is the access's role as the store must have it.
func roleOf(ba *bkv1.BucketAccess, name string, w *bkv1.WebIdentity, st *bkv1.WebIdentityStatus) iam.Role {
	session := defaults.WebIdentityMaxSessionDuration
	if w.MaxSessionDuration != nil {
		session = w.MaxSessionDuration.Duration
	}
	return iam.Role{Name: name, ProviderARN: st.ProviderARN, Issuer: st.Issuer, Audience: st.Audience,
		Subject: iam.ServiceAccountSubject(ba.Namespace, ba.Spec.ServiceAccountName), MaxSessionDuration: session}
}

// reconcileRole ensures the role, its trust policy and its inline policy, when they
// differ from what this process last wrote (after a restart: once).
func (r *Reconciler) reconcileRole(ctx context.Context, s *accessScope) error {
	w, st, why := storeTrust(s.store)
	if why != nil && why.Reason == bkv1.ReasonIssuerShared {
		// Another cluster's tokens would pass its trust policy: the role goes now.
		return r.revokeForGoneBucket(ctx, s.ba, why)
	}
	if why != nil {
		return why
	}
	roles, ok := iam.RolesOf(s.driver)
	if !ok {
		return reconcile.Terminalf(bkv1.ReasonNotSupportedByStore, "the IAM driver of ObjectStore %q has no role operations", s.store.Name)
	}
	role := roleOf(s.ba, s.user, w, st)
	trust, err := iam.TrustPolicyDocument(role)
	if err != nil {
		return reconcile.Terminalf(bkv1.ReasonConfigFailed, "%v", err)
	}
	doc, err := iam.PolicyDocument(s.grants)
	if err != nil {
		return reconcile.Terminalf(bkv1.ReasonConfigFailed, "%v", err)
	}
	ba := s.ba
	applied := fmt.Sprintf("%s\n%s\n%s\n%s", s.store.Name, trust, role.MaxSessionDuration, doc)
	if arn, ok := r.roles.Get(ba.UID); ok && r.appliedOf(ba.UID) == applied {
		// Written by this process; a status read from a cache the last pass's write
		// has not reached yet gets the role back.
		ba.Status.RoleARN, ba.Status.TokenAudience = arn, st.Audience
		return nil
	}
	arn, err := roles.EnsureRole(ctx, role)
	if err != nil {
		return err
	}
	if err := roles.PutRolePolicy(ctx, role.Name, s.grants); err != nil {
		if iam.KindOf(err) == iam.KindNotImplemented {
			// The store's check said otherwise, or it changed since: no role without
			// its policy stays behind.
			if derr := roles.DeleteRole(ctx, role.Name); derr != nil {
				return derr
			}
			return reconcile.Terminalf(bkv1.ReasonNotSupportedByStore, "ObjectStore %q keeps no inline role policies: %v", s.store.Name, err)
		}
		return err
	}
	r.setApplied(ba.UID, applied)
	r.roles.Set(ba.UID, arn)
	first := ba.Status.RoleARN != arn
	ba.Status.RoleARN, ba.Status.TokenAudience = arn, st.Audience
	if first {
		r.Recorder.Eventf(ba, nil, corev1.EventTypeNormal, bkv1.ReasonRoleIssued, "IssueRole",
			"role %s admits the tokens of ServiceAccount %s for audience %s; Secret %s holds its settings",
			arn, ba.Spec.ServiceAccountName, st.Audience, ba.Spec.SecretName)
	}
	return nil
}

// writeKeylessSecret writes the access's Secret: the role, where the Pod's token is,
// where STS and the store are, and the buckets. No key.
func (r *Reconciler) writeKeylessSecret(ctx context.Context, s *accessScope) error {
	data := connectionData(s)
	data[bkv1.AccessSecretKeyRoleARN] = []byte(s.ba.Status.RoleARN)
	data[bkv1.AccessSecretKeyWebIdentityTokenFile] = []byte(bkv1.WebIdentityTokenPath)
	if sts := stsEndpoint(s.store); sts != "" {
		data[bkv1.AccessSecretKeyEndpointSTS] = []byte(sts)
	}
	if _, err := r.currentAccessSecret(ctx, s.ba); err != nil {
		return err
	}
	return r.writeSecretData(ctx, s, data)
}

// stsEndpoint is where a store's applications exchange tokens for sessions: the
// webIdentity's stsEndpoint, else the store's IAM endpoint; "" on AWS.
func stsEndpoint(store *bkv1.ObjectStore) string {
	if w := store.Spec.AccessProvider.WebIdentity; w != nil && w.STSEndpoint != "" {
		return w.STSEndpoint
	}
	endpoint, _ := stores.IAMConfigOf(store)
	return endpoint
}

// deleteRole deletes the access's role and its policy on store; a store without role
// operations has none of ours.
func (r *Reconciler) deleteRole(ctx context.Context, store *bkv1.ObjectStore, ba *bkv1.BucketAccess) error {
	driver, err := r.Access.DriverFor(ctx, store)
	if err != nil {
		return err
	}
	roles, ok := iam.RolesOf(driver)
	if !ok {
		return nil
	}
	return roles.DeleteRole(ctx, accessIdentity(r.ClusterID, ba))
}
