package objectstore

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// webIdentityRun is the last registration this process made for a store: what it
// registered and when, so that a healthy store costs no IAM call per health check.
type webIdentityRun struct {
	want string // registrationKey of the spec it was for
	at   time.Time
	ok   bool
}

// registrationKey says what a registration depends on: the spec's web identity and
// the store's generation (its credentials or endpoint may have changed).
func registrationKey(store *bkv1.ObjectStore) string {
	w := store.Spec.AccessProvider.WebIdentity
	return fmt.Sprintf("%s/%d\n%s\n%s\n%s", store.UID, store.Generation, w.Issuer, w.Audience, strings.Join(w.Thumbprints, ","))
}

// checkWebIdentity keeps the store's trust in the cluster's ServiceAccount tokens
// (spec.accessProvider.webIdentity) and its WebIdentityReady condition: the issuer's
// key set checked to be this cluster's alone (checkIssuerKeys, on every health check),
// the issuer registered as the store's OpenID Connect provider, with the audience and
// the thumbprints (the spec's, or those computed from the issuer's key set host), and
// a probe that the store keeps inline role policies, which every keyless access needs.
// It registers again when the spec changes, after a failure (WebIdentityRetry) or a
// refused key set, and every WebIdentityRecheck; in between it keeps the verdict.
// Without webIdentity the condition and status go; the provider stays on the store
// (other stores of its account may trust the same issuer, and without roles it grants
// nothing).
func (r *Reconciler) checkWebIdentity(ctx context.Context, store *bkv1.ObjectStore, patcher *reconcile.StatusPatcher) {
	if p := store.Spec.AccessProvider; p == nil || p.WebIdentity == nil || stores.AccessProviderOf(store) != bkv1.AccessProviderIAM || r.Access == nil {
		reconcile.RemoveCondition(&store.Status.Conditions, bkv1.ConditionWebIdentityReady)
		store.Status.WebIdentity = nil
		r.forgetWebIdentity(store.Name)
		r.issuerUnread.Delete(store.Name)
		return
	}
	now := r.Clock.Now()
	refused, unchecked := r.checkIssuerKeys(ctx, store, now)
	if refused != nil {
		r.forgetWebIdentity(store.Name) // registered again once the key set is the cluster's
		r.reportWebIdentity(store, patcher, metav1.ConditionFalse, refused.Reason, refused.Message)
		return
	}
	key := registrationKey(store)
	if last, ok := r.lastWebIdentity(store.Name); ok && last.want == key && reconcile.FindCondition(store.Status.Conditions, bkv1.ConditionWebIdentityReady) != nil {
		wait := defaults.WebIdentityRetry
		if last.ok {
			wait = defaults.WebIdentityRecheck
		}
		if now.Sub(last.at) < wait {
			return
		}
	}
	status, reason, message := metav1.ConditionTrue, bkv1.ReasonReady, ""
	registered, err := r.registerIssuer(ctx, store)
	if err != nil {
		status, reason, message = metav1.ConditionFalse, err.Reason, err.Message
	} else {
		store.Status.WebIdentity = registered
		message = fmt.Sprintf("the store trusts ServiceAccount tokens of %s for audience %s (OIDC provider %s) and keeps roles' policies",
			registered.Issuer, registered.Audience, registered.ProviderARN)
		if unchecked != "" {
			message += "; " + unchecked
		}
	}
	r.setLastWebIdentity(store.Name, webIdentityRun{want: key, at: now, ok: err == nil})
	r.reportWebIdentity(store, patcher, status, reason, message)
}

// reportWebIdentity sets WebIdentityReady, with an Event when its status or reason
// changes.
func (r *Reconciler) reportWebIdentity(store *bkv1.ObjectStore, patcher *reconcile.StatusPatcher, status metav1.ConditionStatus, reason, message string) {
	before := reconcile.FindCondition(store.Status.Conditions, bkv1.ConditionWebIdentityReady)
	if before == nil || before.Status != status || before.Reason != reason {
		eventType := corev1.EventTypeNormal
		if status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		patcher.AfterWrite(func() { r.Recorder.Eventf(store, nil, eventType, reason, "WebIdentity", "%s", message) })
	}
	reconcile.SetCondition(&store.Status.Conditions, store.Generation, bkv1.ConditionWebIdentityReady, status, reason, message)
}

// registerIssuer registers the issuer on the store and proves the store keeps role
// policies; the error carries the condition's reason.
func (r *Reconciler) registerIssuer(ctx context.Context, store *bkv1.ObjectStore) (*bkv1.WebIdentityStatus, *reconcile.StepError) {
	w := store.Spec.AccessProvider.WebIdentity
	d, err := r.Access.DriverFor(ctx, store)
	if err != nil {
		return nil, reconcile.AsStepError(err, "building the IAM client")
	}
	roles, ok := iam.RolesOf(d)
	if !ok {
		return nil, &reconcile.StepError{Reason: bkv1.ReasonNotSupportedByStore, Message: "the store's IAM driver has no role operations"}
	}
	thumbprints := slices.Clone(w.Thumbprints)
	if len(thumbprints) == 0 {
		fetch, cancel := context.WithTimeout(ctx, defaults.IssuerFetchTimeout)
		tp, err := iam.Thumbprint(fetch, r.issuerClient(), w.Issuer)
		cancel()
		if err != nil {
			return nil, &reconcile.StepError{Reason: bkv1.ReasonIssuerUnreachable,
				Message: fmt.Sprintf("computing the thumbprint of the issuer's key set host (give spec.accessProvider.webIdentity.thumbprints to skip it): %v", err)}
		}
		thumbprints = []string{tp}
	}
	arn, err := roles.EnsureOIDCProvider(ctx, iam.OIDCProvider{URL: w.Issuer, Audiences: []string{w.Audience}, Thumbprints: thumbprints})
	if err != nil {
		return nil, webIdentityError(err, "registering the issuer as the store's OIDC provider")
	}
	if err := roles.CheckRoles(ctx, r.ClusterID); err != nil {
		return nil, webIdentityError(err, "checking that the store keeps roles' inline policies (PutRolePolicy)")
	}
	return &bkv1.WebIdentityStatus{Issuer: w.Issuer, ProviderARN: arn, Audience: w.Audience, Thumbprints: thumbprints}, nil
}

// webIdentityError maps an IAM error of the registration to the condition's reason.
func webIdentityError(err error, doing string) *reconcile.StepError {
	out := &reconcile.StepError{Reason: bkv1.ReasonAccessProviderUnavailable, Message: fmt.Sprintf("%s: %v", doing, err), Err: err}
	switch iam.KindOf(err) {
	case iam.KindNotImplemented:
		out.Reason = bkv1.ReasonNotSupportedByStore
	case iam.KindAccessDenied:
		out.Reason = bkv1.ReasonAccessDenied
	case iam.KindInvalidCredentials:
		out.Reason = bkv1.ReasonCredentialsInvalid
	case iam.KindInvalid:
		out.Reason = bkv1.ReasonConfigFailed
	}
	return out
}

// issuerClient is the HTTP client the issuer's documents are read with: the one the
// operator was given, or one that trusts the system's roots.
func (r *Reconciler) issuerClient() *http.Client {
	if r.IssuerHTTPClient != nil {
		return r.IssuerHTTPClient
	}
	return &http.Client{Timeout: defaults.IssuerFetchTimeout}
}

func (r *Reconciler) lastWebIdentity(store string) (webIdentityRun, bool) {
	return r.webIdentity.Get(store)
}

func (r *Reconciler) setLastWebIdentity(store string, run webIdentityRun) {
	r.webIdentity.Set(store, run)
}

func (r *Reconciler) forgetWebIdentity(store string) { r.webIdentity.Delete(store) }
