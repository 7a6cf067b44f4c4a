package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StorageBucketSpec is what an application asks for: one bucket on one ObjectStore.
//
// +kubebuilder:validation:XValidation:rule="has(self.bucketName) == has(oldSelf.bucketName) && (!has(self.bucketName) || self.bucketName == oldSelf.bucketName)",message="bucketName cannot be added, changed or removed after creation: create a new StorageBucket for another bucket"
// +kubebuilder:validation:XValidation:rule="!has(self.objectLock) || !has(self.versioning) || self.versioning == 'Enabled'",message="objectLock needs versioning Enabled (or unset): a locked bucket keeps every version, and S3 refuses to suspend versioning on it"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.objectLock) || has(self.objectLock)",message="objectLock cannot be removed: S3 cannot turn object lock off once a bucket has it"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.objectLock) || !has(oldSelf.objectLock.defaultRetention) || oldSelf.objectLock.defaultRetention.mode != 'Compliance' || (has(self.objectLock) && has(self.objectLock.defaultRetention) && self.objectLock.defaultRetention.mode == 'Compliance' && ((has(self.objectLock.defaultRetention.years) && has(oldSelf.objectLock.defaultRetention.years)) ? self.objectLock.defaultRetention.years >= oldSelf.objectLock.defaultRetention.years : (has(self.objectLock.defaultRetention.years) ? self.objectLock.defaultRetention.years * 365 : self.objectLock.defaultRetention.days) >= (has(oldSelf.objectLock.defaultRetention.years) ? oldSelf.objectLock.defaultRetention.years * 366 : oldSelf.objectLock.defaultRetention.days)))",message="a Compliance default retention cannot be removed, shortened or turned into Governance: Compliance is a promise that nobody may weaken the lock"
// +kubebuilder:validation:XValidation:rule="!has(self.objectLock) || !has(self.objectLock.defaultRetention) || !has(self.probe) || !has(self.probe.mode) || self.probe.mode != 'ReadWrite'",message="probe.mode ReadWrite cannot be used with objectLock.defaultRetention: every canary object would be locked and pile up; use the Head probe"
type StorageBucketSpec struct {
	// ObjectStoreRef names the ObjectStore the bucket should live on. It may change
	// only with spec.move set, which moves the bucket and its objects there
	// (status.objectStore is where it lives meanwhile); setting it back before the
	// cutover cancels the move. It may also change, without spec.move, to the store
	// the bucket lives on: a store that retires into another (ObjectStore
	// spec.retire) moves its buckets there and never rewrites this field, which the
	// owner brings up to date at leisure (docs/retiring.md). (That rule reads
	// status.objectStore, which only the operator writes, so it sits on the whole
	// StorageBucket, not on its spec.)
	ObjectStoreRef ObjectStoreReference `json:"objectStoreRef"`

	// Move allows objectStoreRef to change, and says how the bucket is moved.
	// +optional
	Move *MoveSpec `json:"move,omitempty"`

	// BucketName is the bucket's name on the store. When absent, a name is derived
	// from the store's bucketNamePrefix, the namespace and the name (with a short hash
	// when it has to be shortened), so the same claim always maps to the same bucket.
	// Immutable.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="size(self) >= 3",message="bucketName must be at least 3 characters long"
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][a-z0-9.-]*[a-z0-9]$')",message="bucketName may contain only lowercase letters, digits, '.' and '-', and must start and end with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="!self.contains('..')",message="bucketName must not contain two adjacent periods"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+$')",message="bucketName must not be formatted as an IPv4 address"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('xn--') && !self.startsWith('sthree-')",message="bucketName must not start with 'xn--' or 'sthree-' (reserved by S3)"
	// +kubebuilder:validation:XValidation:rule="!self.endsWith('-s3alias') && !self.endsWith('--ol-s3')",message="bucketName must not end with '-s3alias' or '--ol-s3' (reserved by S3)"
	BucketName string `json:"bucketName,omitempty"`

	// Region to create the bucket in; defaults to the store's region.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][a-z0-9-]*$')",message="region may contain only lowercase letters, digits and '-'"
	Region string `json:"region,omitempty"`

	// Versioning of the bucket's objects. Unset leaves the bucket's versioning as it
	// is, unless the operator set it earlier: S3 cannot turn versioning off once it was
	// enabled, only suspend it, so dropping versioning the operator enabled suspends it
	// (the nearest state to "removed"; objects keep their existing versions). A bucket
	// versioned before it was adopted keeps its versioning while the spec leaves it unset.
	// +optional
	Versioning VersioningState `json:"versioning,omitempty"`

	// Tags set on the bucket, merged with the operator's ownership tags, which win.
	// A tag the operator set and the spec then drops is removed; a tag found on an
	// adopted bucket is kept unless the spec sets the same key.
	// +optional
	// S3 allows 50 tags per bucket and bucketkeeper sets 3 (claim, uid, cluster), which
	// leaves 47. Keys and values must keep to S3's tag character set (letters, digits,
	// spaces and _ . : / = + - @); that is checked before anything is sent to the store,
	// since a CEL check of every character exceeds the API server's validation budget.
	// +kubebuilder:validation:MaxProperties=47
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) >= 1 && size(k) <= 128)",message="tag keys must be 1 to 128 characters long"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 256)",message="tag values must be at most 256 characters long"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('bucketkeeper.io/') && !k.startsWith('aws:'))",message="tag keys starting with 'bucketkeeper.io/' or 'aws:' are reserved"
	Tags map[string]string `json:"tags,omitempty"`

	// Lifecycle rules of the bucket, by rule ID. Removing a rule here removes it from
	// the bucket; rules found on an adopted bucket stay unless a rule here has the same
	// ID, which replaces it.
	// +optional
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`

	// CORS is the bucket's cross-origin resource sharing configuration: the rules by
	// which browsers let pages of other origins use the bucket, in order (the first
	// rule that matches a request answers it). It replaces the bucket's CORS
	// configuration as a whole. Removing it deletes a configuration the operator set;
	// one found on an adopted bucket stays while none is given here. On a store
	// without bucket CORS (MinIO) the claim reports it (Configured=False,
	// NotSupportedByStore) and the rest of the configuration still applies.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	CORS []CORSRule `json:"cors,omitempty"`

	// PublicAccess blocks (default) or allows public ACLs and policies on the bucket.
	// +optional
	// +kubebuilder:default=Blocked
	PublicAccess PublicAccess `json:"publicAccess,omitempty"`

	// Policy is the bucket policy document, as a JSON object with a Statement. It is
	// read strictly: only the keys of the policy grammar (Version, Id, Statement; Sid,
	// Effect, Principal, NotPrincipal, Action, NotAction, Resource, Condition), in
	// their exact case and each once. Every statement's Resource must name only this
	// bucket and its objects; every statement, Allow or Deny, may name only object,
	// multipart and listing actions (no wildcards, no NotAction), and a Deny no
	// NotPrincipal; an Allow whose principal is not one specific identity (anonymous,
	// a wildcard, an ARN with an empty account, a CanonicalUser, Federated or Service
	// principal, any form the guardrail does not know) makes the bucket public and
	// needs the store's guardrails.allowPublicBuckets. At most
	// 20 KiB, S3's limit. Admission checks only that it is an object (neither the
	// schema nor CEL can see inside it or measure it); the rest is checked before
	// anything is sent, and the store is sent the document as checked, rewritten in
	// a canonical key order. It replaces the bucket's policy as a whole. Removing it
	// deletes a policy the operator set; a policy found on an adopted bucket stays
	// while none is given here.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Policy *apiextensionsv1.JSON `json:"policy,omitempty"`

	// DeletionPolicy says what happens to the bucket when this object is deleted.
	// Retain keeps it (released, so only a claim with the same namespace and name can
	// bind it again); Delete deletes it only when it is empty; Purge deletes every
	// object and version first.
	// +optional
	// +kubebuilder:default=Retain
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// Adoption says whether a pre-existing bucket without bucketkeeper ownership tags
	// may be taken over. A bucket owned by another claim is never taken over.
	// +optional
	// +kubebuilder:default=Never
	Adoption AdoptionPolicy `json:"adoption,omitempty"`

	// Probe configures the bucket's health probe.
	// +optional
	// +kubebuilder:default={}
	Probe ProbeSpec `json:"probe,omitempty"`

	// ConnectionSecret configures the Secret that hands applications the bucket.
	// +optional
	ConnectionSecret ConnectionSecretSpec `json:"connectionSecret,omitempty"`

	// Suspend stops all reconciliation and probing of this bucket until unset.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Access, on a store whose accessProvider is IAM, gives this bucket its own
	// credentials without a separate object: ReadWrite or ReadOnly makes an implicit
	// BucketAccess of the same name, owned by this StorageBucket, writing the Secret
	// <name>-access. None (or absent) makes none; several buckets or rotation need
	// an explicit BucketAccess.
	// +optional
	// +kubebuilder:validation:Enum=ReadWrite;ReadOnly;None
	Access string `json:"access,omitempty"`

	// Quota limits what the bucket may hold, on stores whose ObjectStore has an
	// adminAPI that sets quotas (Ceph RGW, and SeaweedFS for size; docs/stores.md says
	// how each store enforces them). Absent: the store's guardrails.quota.default, if any. It
	// may not exceed the store's guardrails.quota.max. On a store without a quota
	// API a quota is reported (Configured=False, NotSupportedByStore) and the rest of
	// the configuration still applies.
	// +optional
	Quota *BucketQuota `json:"quota,omitempty"`

	// ObjectLock makes the bucket write-once (S3 Object Lock, WORM): an object version
	// under a retention or a legal hold cannot be deleted or overwritten until it ends;
	// a plain DELETE only adds a delete marker. A new bucket is created with it (which
	// turns versioning on); on an existing bucket it is turned on where the store can
	// (after enabling versioning), else the claim reports NotSupportedByStore. It cannot
	// be removed: S3 cannot turn object lock off. The store's guardrails.objectLock say
	// which retention modes and how long a retention a claim may ask for, and what a
	// Purge does with locked versions (docs/object-lock.md).
	// +optional
	ObjectLock *ObjectLock `json:"objectLock,omitempty"`
}

// BucketQuota limits a bucket's size and object count. An absent field sets no limit.
type BucketQuota struct {
	// MaxSize is the most the bucket's objects may add up to, as a quantity of
	// bytes (e.g. 10Gi); at least 1 byte.
	// +optional
	MaxSize *resource.Quantity `json:"maxSize,omitempty"`
	// MaxObjects is the most objects the bucket may hold.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxObjects *int64 `json:"maxObjects,omitempty"`
}

// ObjectStoreReference names a cluster-scoped ObjectStore.
type ObjectStoreReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// VersioningState is the versioning status of a bucket.
// +kubebuilder:validation:Enum=Enabled;Suspended
type VersioningState string

const (
	// VersioningEnabled keeps every version of every object.
	VersioningEnabled VersioningState = "Enabled"
	// VersioningSuspended stops making new versions and keeps the existing ones (S3
	// cannot turn versioning off once it was on).
	VersioningSuspended VersioningState = "Suspended"
)

// PublicAccess says whether public access to a bucket is blocked.
// +kubebuilder:validation:Enum=Blocked;Allowed
type PublicAccess string

const (
	// PublicAccessBlocked turns on every setting of the bucket's public-access block.
	PublicAccessBlocked PublicAccess = "Blocked"
	// PublicAccessAllowed lifts the public-access block, where the store's
	// guardrails.allowPublicBuckets allows it.
	PublicAccessAllowed PublicAccess = "Allowed"
)

// DeletionPolicy says what happens to a bucket when its StorageBucket is deleted.
// +kubebuilder:validation:Enum=Retain;Delete;Purge
type DeletionPolicy string

const (
	// DeletionPolicyRetain keeps the bucket and its data, released so that only a new
	// StorageBucket of the same cluster, namespace and name binds it again.
	DeletionPolicyRetain DeletionPolicy = "Retain"
	// DeletionPolicyDelete deletes the bucket only if it is empty (else BucketNotEmpty).
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyPurge deletes every object, version and incomplete upload, then
	// the bucket.
	DeletionPolicyPurge DeletionPolicy = "Purge"
)

// AdoptionPolicy says whether an unowned pre-existing bucket may be taken over.
// +kubebuilder:validation:Enum=Never;IfUnowned
type AdoptionPolicy string

const (
	// AdoptionNever refuses a pre-existing bucket of the claim's name (BucketNotOwned).
	AdoptionNever AdoptionPolicy = "Never"
	// AdoptionIfUnowned takes over a pre-existing bucket that carries no owner tags and
	// that the operator's own account owns, where the store's
	// guardrails.adoptionAllowedNamespaces selects the claim's namespace.
	AdoptionIfUnowned AdoptionPolicy = "IfUnowned"
)

// ProbeMode is how a bucket's health is probed.
// +kubebuilder:validation:Enum=Head;ReadWrite
type ProbeMode string

const (
	// ProbeModeHead sends one HeadBucket: cheap, proves the bucket exists and the
	// credentials may see it.
	ProbeModeHead ProbeMode = "Head"
	// ProbeModeReadWrite writes, reads back and deletes a small canary object under
	// .bucketkeeper/probe/: proves the data path works end to end.
	ProbeModeReadWrite ProbeMode = "ReadWrite"
)

// Lifecycle holds a bucket's lifecycle rules.
type Lifecycle struct {
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=100
	Rules []LifecycleRule `json:"rules,omitempty"`
}

// LifecycleRule expires objects under a prefix.
//
// +kubebuilder:validation:XValidation:rule="has(self.expirationDays) || has(self.noncurrentVersionExpirationDays) || has(self.abortIncompleteMultipartUploadDays)",message="a lifecycle rule needs at least one of expirationDays, noncurrentVersionExpirationDays or abortIncompleteMultipartUploadDays"
type LifecycleRule struct {
	// ID names the rule; unique within the bucket.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	ID string `json:"id"`
	// Prefix limits the rule to keys starting with it; empty means every object.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Prefix string `json:"prefix,omitempty"`
	// ExpirationDays deletes current object versions this many days after creation.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ExpirationDays *int32 `json:"expirationDays,omitempty"`
	// NoncurrentVersionExpirationDays deletes versions this many days after they
	// stopped being current.
	// +optional
	// +kubebuilder:validation:Minimum=1
	NoncurrentVersionExpirationDays *int32 `json:"noncurrentVersionExpirationDays,omitempty"`
	// AbortIncompleteMultipartUploadDays aborts multipart uploads left unfinished.
	// +optional
	// +kubebuilder:validation:Minimum=1
	AbortIncompleteMultipartUploadDays *int32 `json:"abortIncompleteMultipartUploadDays,omitempty"`
}

// ProbeSpec configures a bucket's health probe.
//
// +kubebuilder:validation:XValidation:rule="!has(self.timeout) || !has(self.interval) || !self.timeout.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || !self.interval.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self.timeout) < duration(self.interval)",message="probe.timeout must be shorter than probe.interval"
type ProbeSpec struct {
	// Interval between two probes, from 10s to 24h. Unset means the operator's
	// --default-probe-interval (1m unless changed).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="probe.interval must be a duration such as 30s, 5m or 1h"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('10s') && duration(self) <= duration('24h'))",message="probe.interval must be between 10s and 24h"
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Timeout of one probe; shorter than the interval.
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="probe.timeout must be a duration such as 5s or 1m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) >= duration('1s')",message="probe.timeout must be at least 1s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Mode of the probe: Head (default) or ReadWrite.
	// +optional
	// +kubebuilder:default=Head
	Mode ProbeMode `json:"mode,omitempty"`
}

// ConnectionSecretSpec configures the connection Secret.
type ConnectionSecretSpec struct {
	// Name of the Secret; defaults to <storagebucket name>-bucket.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="connectionSecret.name must be a valid Secret name: lowercase letters, digits, '-' and '.'"
	Name string `json:"name,omitempty"`
}

// StorageBucket is a bucket on an S3-compatible store, claimed by an application.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sb,categories=bucketkeeper
// +kubebuilder:selectablefield:JSONPath=`.spec.objectStoreRef.name`
// +kubebuilder:selectablefield:JSONPath=`.status.objectStore`
// +kubebuilder:selectablefield:JSONPath=`.status.move.targetKeptOn`
// +kubebuilder:selectablefield:JSONPath=`.status.retirement.into`
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.status.bucketName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last-Probe",type=date,JSONPath=`.status.lastProbeTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.usage.bytes`,priority=1,description="Bytes the bucket holds, as the store last counted them"
// +kubebuilder:printcolumn:name="Objects",type=integer,JSONPath=`.status.usage.objects`,priority=1
// +kubebuilder:printcolumn:name="Store",type=string,JSONPath=`.status.objectStore`,priority=1,description="The ObjectStore the bucket lives on now"
// +kubebuilder:printcolumn:name="Move",type=string,JSONPath=`.status.move.phase`,priority=1,description="Phase of the bucket's last move between stores"
// +kubebuilder:printcolumn:name="Moved",type=integer,JSONPath=`.status.move.copiedBytes`,priority=1,description="Bytes the move copied"
// +kubebuilder:printcolumn:name="Lock",type=string,JSONPath=`.status.objectLock.defaultRetention.mode`,priority=1,description="Mode of the bucket's default object lock retention"
// +kubebuilder:validation:XValidation:rule="self.spec.objectStoreRef == oldSelf.spec.objectStoreRef || has(self.spec.move) || (has(self.status) && has(self.status.objectStore) && self.spec.objectStoreRef.name == self.status.objectStore)",message="objectStoreRef can change only with spec.move set (that moves the bucket and its objects to the other store), or to the store the bucket lives on (status.objectStore)"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 240",message="a StorageBucket's name may have at most 240 characters: its Secrets are named <name>-bucket and <name>-access"
type StorageBucket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the application team's: the store, the bucket's settings, its probe and
	// its deletion policy.
	Spec StorageBucketSpec `json:"spec"`
	// Status is what the operator found and did: the bucket, its conditions, the last
	// probe, what it applied and the usage.
	// The default observedGeneration 0, filled in on every read until the operator
	// writes its first status, makes a new object InProgress to kstatus (and so to
	// GitOps health checks) rather than Current before anyone looked at it.
	// +kubebuilder:default={observedGeneration: 0}
	Status StorageBucketStatus `json:"status,omitempty"`
}

// StorageBucketList is a list of StorageBuckets.
//
// +kubebuilder:object:root=true
type StorageBucketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StorageBucket `json:"items"`
}

func init() {
	SchemeBuilder.Register(&StorageBucket{}, &StorageBucketList{})
}
