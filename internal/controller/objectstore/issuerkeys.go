package objectstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// The keys this cluster's API server publishes (ClusterKeys):
// +kubebuilder:rbac:urls=/openid/v1/jwks,verbs=get

// checkIssuerKeys binds the store's trust to this cluster (see iam.KeySet): a
// ServiceAccount token says nothing of the cluster that signed it, so a store trusting
// an issuer whose key set another cluster signs with too would let that cluster's
// ServiceAccounts assume this one's roles, by namespace and name. Every key the issuer
// publishes (its discovery document's jwks_uri, as the store reads it) must therefore
// be one this cluster's API server publishes (ClusterKeys); a foreign one refuses the
// store (IssuerShared), and its accesses' roles are deleted (the BucketAccess
// reconciler). It runs on every health check, so a key set another cluster joins is
// refused within the store's interval.
//
// An issuer the operator cannot read is refused as unreachable, unless the spec gives
// the thumbprints (the way to skip reading the issuer): then the check cannot be made,
// unchecked says so for the condition's message, and it is tried again only after
// WebIdentityRecheck, so an issuer that never answers does not slow every health check.
func (r *Reconciler) checkIssuerKeys(ctx context.Context, store *bkv1.ObjectStore, now time.Time) (refusal *reconcile.StepError, unchecked string) {
	w := store.Spec.AccessProvider.WebIdentity
	if until, ok := r.issuerUnread.Get(store.Name); ok && len(w.Thumbprints) > 0 && now.Before(until.at) && until.issuer == w.Issuer {
		return nil, until.why
	}
	r.issuerUnread.Delete(store.Name)
	ctx, cancel := context.WithTimeout(ctx, defaults.IssuerFetchTimeout)
	defer cancel()
	published, err := iam.IssuerKeySet(ctx, r.issuerClient(), w.Issuer)
	if err != nil {
		if len(w.Thumbprints) > 0 {
			why := fmt.Sprintf("the operator cannot read the issuer's key set (%v), so that no other cluster signs for the issuer is unchecked", err)
			r.issuerUnread.Set(store.Name, unreadIssuer{issuer: w.Issuer, at: now.Add(defaults.WebIdentityRecheck), why: why})
			return nil, why
		}
		return &reconcile.StepError{Reason: bkv1.ReasonIssuerUnreachable, Message: fmt.Sprintf("reading the issuer's key set: %v", err)}, ""
	}
	if r.ClusterKeys == nil {
		return &reconcile.StepError{Reason: bkv1.ReasonIssuerUnreachable, Message: "the operator has no way to read this cluster's ServiceAccount keys"}, ""
	}
	own, err := r.ClusterKeys(ctx)
	if err != nil {
		return &reconcile.StepError{Reason: bkv1.ReasonIssuerUnreachable,
			Message: fmt.Sprintf("reading the ServiceAccount keys this cluster's API server publishes (GET /openid/v1/jwks): %v", err)}, ""
	}
	if foreign := published.Foreign(own); len(foreign) > 0 {
		return &reconcile.StepError{Reason: bkv1.ReasonIssuerShared, Message: fmt.Sprintf(
			"the issuer's key set holds %d key(s) this cluster's API server does not publish (%s): whoever signs with them, another cluster sharing the issuer, "+
				"could assume this cluster's roles with tokens of a namespace and ServiceAccount of the same names; the store is not trusted and its roles are deleted "+
				"until the issuer publishes this cluster's keys alone (give each cluster an issuer of its own)", len(foreign), strings.Join(foreign, ", "))}, ""
	}
	return nil, ""
}

// unreadIssuer is an issuer the operator could not read, for a store that gives
// thumbprints: until when checkIssuerKeys leaves it, and why.
type unreadIssuer struct {
	issuer string
	at     time.Time
	why    string
}
