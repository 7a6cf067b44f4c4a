package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Keyless access: what an ObjectStore says of its trust in the cluster's
// ServiceAccount tokens (spec.accessProvider.webIdentity) and what it registered
// (status.webIdentity). A BucketAccess asks for it with spec.serviceAccountName.

// WebIdentity is the store's trust in this cluster's ServiceAccount tokens.
type WebIdentity struct {
	// Issuer is the cluster's ServiceAccount token issuer, exactly as the
	// kube-apiserver's --service-account-issuer (and every token's iss) says it: an
	// https URL from which the store fetches <issuer>/.well-known/openid-configuration
	// and the key set it names. The store must reach it; Ceph RGW reaches the key
	// set's host on port 443.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() == 'https' && url(self).getHostname() != '' && !self.contains('?') && !self.contains('#')",message="webIdentity.issuer must be an https URL with a host and no query, e.g. https://oidc.example.com/cluster"
	Issuer string `json:"issuer"`
	// Audience is the audience every token must be issued for (the aud a Pod's
	// projected ServiceAccount token volume asks for): the store registers it as the
	// provider's client ID and each role's trust policy requires it, so a token the
	// cluster issued for anything else is refused.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Audience string `json:"audience"`
	// Thumbprints are the SHA-1 thumbprints (40 hex digits) of the certificate the
	// key set's host presents last, which the store checks when it fetches the keys.
	// Absent: the operator computes it, over a connection verified against the
	// system's roots; give them for an issuer whose certificate those roots do not
	// vouch for.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:items:Pattern=`^[0-9a-fA-F]{40}$`
	Thumbprints []string `json:"thumbprints,omitempty"`
	// MaxSessionDuration is the longest session a role grants (the role's
	// MaxSessionDuration, between 1h and 12h as IAM allows; SDKs ask for an hour).
	// An issued session cannot be revoked on most stores: keep it short.
	// +optional
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="webIdentity.maxSessionDuration must be a duration such as 1h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('1h') && duration(self) <= duration('12h'))",message="webIdentity.maxSessionDuration must be between 1h and 12h"
	MaxSessionDuration *metav1.Duration `json:"maxSessionDuration,omitempty"`
	// STSEndpoint is where applications exchange their tokens for sessions
	// (AWS_ENDPOINT_URL_STS in their Secrets). Empty: the IAM endpoint (Ceph RGW and
	// SeaweedFS serve STS on their S3 port, Versity on its IAM service), or AWS STS
	// when the store is AWS S3.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="webIdentity.stsEndpoint must be an http:// or https:// URL with a host"
	STSEndpoint string `json:"stsEndpoint,omitempty"`
}

// WebIdentityStatus is what the store registered for keyless access.
type WebIdentityStatus struct {
	// Issuer the provider was registered for.
	Issuer string `json:"issuer"`
	// ProviderARN is the OpenID Connect provider on the store, the principal every
	// role's trust policy names.
	ProviderARN string `json:"providerARN"`
	// Audience registered with it.
	Audience string `json:"audience"`
	// Thumbprints registered with it: the spec's, or those the operator computed.
	// +optional
	Thumbprints []string `json:"thumbprints,omitempty"`
}
