package v1alpha1

// AccessProviderType names a source of application credentials.
// +kubebuilder:validation:Enum=IAM;Static;None
type AccessProviderType string

// Access provider types.
const (
	// AccessProviderIAM issues one IAM user and key per BucketAccess, scoped to its
	// buckets, through the store's IAM API (or MinIO's admin API, see iam.api): for
	// stores shared by several tenants.
	AccessProviderIAM AccessProviderType = "IAM"
	// AccessProviderStatic copies the one key pair of applicationCredentialsSecretRef into
	// every connection Secret: for a store with a single tenant only, as any application
	// can then read and overwrite any other's bucket.
	AccessProviderStatic AccessProviderType = "Static"
	// AccessProviderNone hands out no keys: applications bring their own identity.
	AccessProviderNone AccessProviderType = "None"
)

// AccessProviderType is the store's effective access provider: spec.accessProvider's
// type, else Static when applicationCredentialsSecretRef is set, else None (the
// defaulting the field's documentation describes, which the CRD cannot express).
func (s *ObjectStoreSpec) AccessProviderType() AccessProviderType {
	if p := s.AccessProvider; p != nil && p.Type != "" {
		return p.Type
	}
	if s.ApplicationCredentialsSecretRef != nil {
		return AccessProviderStatic
	}
	return AccessProviderNone
}

// AccessProvider configures application credentials for a store.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'IAM' || !has(self.iam)",message="accessProvider.iam may only be set when type is IAM"
// +kubebuilder:validation:XValidation:rule="self.type == 'IAM' || !has(self.webIdentity)",message="accessProvider.webIdentity may only be set when type is IAM"
// +kubebuilder:validation:XValidation:rule="!has(self.webIdentity) || !has(self.iam) || !has(self.iam.api) || self.iam.api != 'MinIO'",message="accessProvider.webIdentity is not available with iam.api MinIO: MinIO's admin API has no roles"
type AccessProvider struct {
	// Type of the provider.
	Type AccessProviderType `json:"type"`
	// IAM configures the IAM endpoint when type is IAM.
	// +optional
	IAM *IAMAccessProvider `json:"iam,omitempty"`
	// WebIdentity lets BucketAccesses name a ServiceAccount instead of asking for a
	// key (keyless access): the store trusts this cluster's ServiceAccount tokens,
	// registered as an OpenID Connect provider through its IAM API, and each such
	// BucketAccess gets a role its ServiceAccount's tokens assume.
	// +optional
	WebIdentity *WebIdentity `json:"webIdentity,omitempty"`
}

// IAMAPI names the API through which a store manages its users.
// +kubebuilder:validation:Enum=AWS;MinIO
type IAMAPI string

// IAM APIs.
const (
	// IAMAPIAWS is the AWS IAM API (AWS, Versity S3 Gateway's IAM service, SeaweedFS,
	// Ceph RGW): a user, an inline policy and access keys per BucketAccess.
	IAMAPIAWS IAMAPI = "AWS"
	// IAMAPIMinIO is MinIO's admin API (/minio/admin/v3 on the S3 endpoint), which
	// MinIO serves instead of IAM: a MinIO user, a canned policy attached to it alone
	// and the user's service accounts as keys, per BucketAccess. It needs the
	// operator's static keys (credentialsSecretRef) of a MinIO user allowed to manage
	// users, policies and service accounts. It offers no keyless access.
	IAMAPIMinIO IAMAPI = "MinIO"
)

// IAMAccessProvider says how to reach the store's IAM API. The operator's
// store credentials (credentialsSecretRef) sign its requests; the store's
// caBundle and insecureSkipTLSVerify apply to it too.
type IAMAccessProvider struct {
	// API is the API through which the store manages users: AWS (the AWS IAM API,
	// also when absent) or MinIO (MinIO's admin API).
	// +optional
	API IAMAPI `json:"api,omitempty"`
	// Endpoint of the IAM API. Empty means the store's S3 endpoint (SeaweedFS
	// serves IAM there, MinIO its admin API), or AWS IAM when the store is AWS S3.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="iam.endpoint must be an http:// or https:// URL with a host"
	Endpoint string `json:"endpoint,omitempty"`
	// Region IAM requests are signed for.
	// +optional
	// +kubebuilder:default="us-east-1"
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9-]*$`
	Region string `json:"region,omitempty"`
}
