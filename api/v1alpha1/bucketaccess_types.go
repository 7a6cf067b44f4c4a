package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys of the Secret a BucketAccess writes, named after the environment variables
// the AWS SDKs and CLI read, so that `envFrom` is all an application needs.
const (
	AccessSecretKeyAccessKeyID = "AWS_ACCESS_KEY_ID"
	AccessSecretKeySecretKey   = "AWS_SECRET_ACCESS_KEY"
	AccessSecretKeyRegion      = "AWS_REGION"
	AccessSecretKeyEndpoint    = "AWS_ENDPOINT_URL_S3"
	// AccessSecretKeyBucketName holds the first bucket's name, for the common
	// one-bucket case.
	AccessSecretKeyBucketName = "BUCKET_NAME"
	// AccessSecretKeyBucketNames holds every bucket as "<StorageBucket>=<bucket>",
	// comma-separated, in spec order.
	AccessSecretKeyBucketNames = "BUCKET_NAMES"

	// The keys of a keyless access's Secret (spec.serviceAccountName), which holds no
	// key: the AWS SDKs' default credential chain exchanges the ServiceAccount's
	// projected token, read from AWS_WEB_IDENTITY_TOKEN_FILE, for a session of the
	// role AWS_ROLE_ARN at the STS endpoint AWS_ENDPOINT_URL_STS.
	AccessSecretKeyRoleARN              = "AWS_ROLE_ARN"
	AccessSecretKeyWebIdentityTokenFile = "AWS_WEB_IDENTITY_TOKEN_FILE"
	// AccessSecretKeyEndpointSTS is absent on AWS, whose STS endpoint the SDKs know.
	AccessSecretKeyEndpointSTS = "AWS_ENDPOINT_URL_STS"
)

// AccessMode is what a BucketAccess may do in one bucket.
// +kubebuilder:validation:Enum=ReadWrite;ReadOnly
type AccessMode string

// Access modes.
const (
	// AccessReadWrite reads, writes, deletes and lists objects, multipart uploads
	// included; never bucket configuration (policy, deletion, creation).
	AccessReadWrite AccessMode = "ReadWrite"
	// AccessReadOnly reads and lists objects.
	AccessReadOnly AccessMode = "ReadOnly"
)

// BucketAccessSpec is an application's credentials for one or more StorageBuckets
// of its own namespace.
//
// +kubebuilder:validation:XValidation:rule="!has(self.serviceAccountName) || !has(self.rotation)",message="rotation does not apply to a BucketAccess for a ServiceAccount: it holds no key"
// +kubebuilder:validation:XValidation:rule="has(self.serviceAccountName) == has(oldSelf.serviceAccountName) && (!has(self.serviceAccountName) || self.serviceAccountName == oldSelf.serviceAccountName)",message="serviceAccountName is immutable, and a BucketAccess cannot change between a key and a ServiceAccount: create another BucketAccess"
type BucketAccessSpec struct {
	// Buckets the credentials may use, each with its mode. All must be on the same
	// ObjectStore, whose accessProvider must be IAM.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +listType=map
	// +listMapKey=name
	Buckets []BucketGrant `json:"buckets"`

	// SecretName is the Secret the credentials are written to, in this namespace.
	// The BucketAccess owns it; a Secret of that name it does not own is never
	// overwritten.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="secretName must be a valid Secret name: lowercase letters, digits, '-' and '.'"
	SecretName string `json:"secretName"`

	// Rotation replaces the key periodically, without downtime.
	// +optional
	Rotation *KeyRotation `json:"rotation,omitempty"`

	// ServiceAccountName asks for keyless access: the ServiceAccount of this
	// namespace whose tokens reach the buckets, instead of a key. The operator makes a
	// role on the store that admits only that ServiceAccount's tokens, for the store's
	// audience, with the permissions a key for the same buckets would have, and the
	// Secret holds what an AWS SDK needs to exchange the Pod's projected token for a
	// short session: no key. The store's accessProvider.webIdentity must be set. A
	// ServiceAccount of another namespace cannot be named. Immutable.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="serviceAccountName must be the name of a ServiceAccount of this namespace: lowercase letters, digits, '-' and '.'"
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// BucketGrant is one StorageBucket of an access and its mode.
type BucketGrant struct {
	// Name of a StorageBucket in the BucketAccess's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Mode is ReadWrite (default) or ReadOnly.
	// +optional
	// +kubebuilder:default=ReadWrite
	Mode AccessMode `json:"mode,omitempty"`
}

// KeyRotation configures periodic key rotation.
type KeyRotation struct {
	// Every is the age at which a key is replaced, at least 1h, e.g. 720h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="rotation.every must be a duration such as 720h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) >= duration('1h')",message="rotation.every must be at least 1h"
	Every metav1.Duration `json:"every"`
}

// RotationState says where a key rotation stands.
type RotationState string

// Rotation states.
const (
	// RotationIdle: one key, in the Secret.
	RotationIdle RotationState = "Idle"
	// RotationVerifying: a new key exists and is being tried against the buckets;
	// the Secret still holds the old one.
	RotationVerifying RotationState = "Verifying"
	// RotationGrace: the Secret holds the new key; the old one stays valid until
	// previousKeyExpiresAt so running pods can reload.
	RotationGrace RotationState = "Grace"
)

// RotationStatus is the observed state of key rotation.
type RotationStatus struct {
	// State of the rotation.
	// +optional
	State RotationState `json:"state,omitempty"`
	// PreviousKeyID is the key being retired during the grace period.
	// +optional
	PreviousKeyID string `json:"previousKeyID,omitempty"`
	// PreviousKeyExpiresAt is when the previous key is deleted.
	// +optional
	PreviousKeyExpiresAt *metav1.Time `json:"previousKeyExpiresAt,omitempty"`
	// LastRotationTime is when the Secret last received a new key.
	// +optional
	LastRotationTime *metav1.Time `json:"lastRotationTime,omitempty"`
	// LastHandledRequest is the last value of the bucketkeeper.io/rotate-requested-at
	// annotation that was acted on.
	// +optional
	LastHandledRequest string `json:"lastHandledRequest,omitempty"`
}

// BucketAccessStatus is the observed state of a BucketAccess. It never holds a
// secret.
type BucketAccessStatus struct {
	// ObservedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Reconciling, Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObjectStore the buckets live on.
	// +optional
	ObjectStore string `json:"objectStore,omitempty"`
	// IdentityName is the IAM user holding the credentials, or the role of a
	// BucketAccess for a ServiceAccount.
	// +optional
	IdentityName string `json:"identityName,omitempty"`
	// RoleARN is the role the ServiceAccount's tokens assume (serviceAccountName).
	// +optional
	RoleARN string `json:"roleARN,omitempty"`
	// TokenAudience is the audience the ServiceAccount's projected token must be
	// issued for (serviceAccountName): the store's.
	// +optional
	TokenAudience string `json:"tokenAudience,omitempty"`
	// AccessKeyID is the key in the Secret (never the secret key).
	// +optional
	AccessKeyID string `json:"accessKeyID,omitempty"`
	// KeyCreatedAt is when that key was written to the Secret.
	// +optional
	KeyCreatedAt *metav1.Time `json:"keyCreatedAt,omitempty"`
	// Rotation is where key rotation stands.
	// +optional
	Rotation RotationStatus `json:"rotation,omitempty"`
}

// BucketAccess is an application's own credentials for some StorageBuckets of its
// namespace: an identity on the store scoped to those buckets, its key written to
// a Secret, rotated without downtime and revoked when the BucketAccess goes; or, for
// a ServiceAccount (spec.serviceAccountName), a role its tokens assume, and no key.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=ba,categories=bucketkeeper
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.spec.secretName`
// +kubebuilder:printcolumn:name="ServiceAccount",type=string,JSONPath=`.spec.serviceAccountName`,priority=1
// +kubebuilder:printcolumn:name="Key",type=string,JSONPath=`.status.accessKeyID`
// +kubebuilder:printcolumn:name="Key-Age",type=date,JSONPath=`.status.keyCreatedAt`
// +kubebuilder:printcolumn:name="Rotation",type=string,JSONPath=`.status.rotation.state`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BucketAccess struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the application asks for: its buckets, its Secret, its rotation.
	Spec BucketAccessSpec `json:"spec"`
	// Status is what the operator did: the identity, the key in the Secret, the rotation.
	// The default observedGeneration 0, filled in on every read until the operator
	// writes its first status, makes a new object InProgress to kstatus (and so to
	// GitOps health checks) rather than Current before anyone looked at it.
	// +kubebuilder:default={observedGeneration: 0}
	Status BucketAccessStatus `json:"status,omitempty"`
}

// BucketAccessList is a list of BucketAccesses.
//
// +kubebuilder:object:root=true
type BucketAccessList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BucketAccess `json:"items"`
}

func init() {
	SchemeBuilder.Register(&BucketAccess{}, &BucketAccessList{})
}
