package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ObjectStoreSpec describes how to reach one S3-compatible store and who may use it.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.caBundle) && has(self.insecureSkipTLSVerify) && self.insecureSkipTLSVerify)",message="caBundle and insecureSkipTLSVerify cannot both be set: either trust the given CA or skip verification"
type ObjectStoreSpec struct {
	// Endpoint is the store's S3 URL, e.g. https://s3.example.com:9000. Empty means AWS S3,
	// whose endpoint the SDK derives from the region.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="endpoint must be an http:// or https:// URL with a host, e.g. https://s3.example.com"
	Endpoint string `json:"endpoint,omitempty"`

	// Region buckets are created in when a StorageBucket names none.
	// +optional
	// +kubebuilder:default="us-east-1"
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9-]*$`
	Region string `json:"region,omitempty"`

	// ForcePathStyle addresses buckets as endpoint/bucket instead of bucket.endpoint;
	// most self-hosted stores (SeaweedFS, MinIO, Versity, Ceph RGW) need it.
	// +optional
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`

	// CABundle is a PEM bundle of certificate authorities trusted for this endpoint,
	// in addition to nothing else: when set, the system roots are not used.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	// +kubebuilder:validation:XValidation:rule="self.contains('-----BEGIN CERTIFICATE-----')",message="caBundle must be PEM: one or more -----BEGIN CERTIFICATE----- blocks"
	CABundle string `json:"caBundle,omitempty"`

	// InsecureSkipTLSVerify turns TLS certificate verification off. Only for tests.
	// +optional
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`

	// CredentialsSecretRef names the Secret with the operator's own credentials for
	// this store, under keys accessKeyID and secretAccessKey (and optional
	// sessionToken). Absent means the SDK's default chain (IRSA, pod identity, env).
	// These credentials are never copied into connection Secrets.
	// +optional
	CredentialsSecretRef *SecretReference `json:"credentialsSecretRef,omitempty"`

	// ApplicationCredentialsSecretRef names a Secret with credentials meant for
	// applications (same keys). When set (and accessProvider.type is Static or
	// unset), they are copied into every connection Secret of buckets on this store;
	// when absent, connection Secrets carry no keys. One key shared by every tenant
	// lets any application read and overwrite any other's bucket: unsafe for a
	// multi-tenant store. Prefer accessProvider.type IAM.
	// +optional
	ApplicationCredentialsSecretRef *SecretReference `json:"applicationCredentialsSecretRef,omitempty"`

	// AllowedNamespaces selects the namespaces whose StorageBuckets may use this store
	// by their labels. Absent allows every namespace; an empty selector ({}) too.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="allowedNamespaces.matchExpressions[].operator must be one of In, NotIn, Exists, DoesNotExist"
	AllowedNamespaces *metav1.LabelSelector `json:"allowedNamespaces,omitempty"`

	// BucketNamePrefix starts every bucket name derived for this store, so that
	// several clusters or environments can share one account without collisions.
	// +optional
	// +kubebuilder:validation:MaxLength=24
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][a-z0-9-]*$')",message="bucketNamePrefix may contain only lowercase letters, digits and '-', and must start with a letter or digit"
	BucketNamePrefix string `json:"bucketNamePrefix,omitempty"`

	// HealthCheck configures the cheap store-level probe behind the Ready condition.
	// +optional
	// +kubebuilder:default={}
	HealthCheck StoreHealthCheck `json:"healthCheck,omitempty"`

	// RequestsPerSecond is the steady S3 request budget the operator may spend on this
	// store, shared by provisioning and probes of all its buckets and by the movers of
	// every move into or out of it (which together spend at most half of it).
	// +optional
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	RequestsPerSecond int32 `json:"requestsPerSecond,omitempty"`

	// Burst is how many requests may go out at once above the steady budget.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	Burst int32 `json:"burst,omitempty"`

	// Guardrails are the platform team's limits on what tenants' StorageBuckets may do
	// on this store. Tenants write StorageBuckets, never ObjectStores, so every rule a
	// tenant must not bend lives here. Each one is safe by default.
	// +optional
	// +kubebuilder:default={}
	Guardrails StoreGuardrails `json:"guardrails,omitempty"`

	// Retire moves every bucket of this store to another (docs/retiring.md). A
	// retiring store creates no new bucket: a new StorageBucket naming it is refused
	// and told to name the successor.
	// +optional
	Retire *RetireSpec `json:"retire,omitempty"`

	// AccessProvider says where applications' credentials come from: IAM (a user
	// and key per BucketAccess, scoped to its buckets), Static (the shared keys of
	// applicationCredentialsSecretRef, unsafe for multi-tenant stores) or None (no
	// keys in any Secret). Absent means Static when applicationCredentialsSecretRef
	// is set, else None.
	// +optional
	AccessProvider *AccessProvider `json:"accessProvider,omitempty"`

	// AdminAPI is how the operator reaches the store's admin API, which sets bucket
	// quotas where S3 has no call for it. Absent: quotas on this store are
	// NotSupportedByStore. Its credentials are the operator's alone, never copied
	// into a tenant's Secret.
	// +optional
	AdminAPI *AdminAPI `json:"adminAPI,omitempty"`
}

// AdminAPIType names a store's admin API.
// +kubebuilder:validation:Enum=RGWAdminOps;SeaweedFS
type AdminAPIType string

// AdminAPITypes.
const (
	// AdminAPIRGWAdminOps is Ceph RGW's admin-ops API under /admin/ on the S3
	// endpoint, signed by a user with the capability "buckets=*" (radosgw-admin
	// user create --caps "buckets=*"): an identity of its own, not the S3 one.
	AdminAPIRGWAdminOps AdminAPIType = "RGWAdminOps"
	// AdminAPISeaweedFS is SeaweedFS's bucket quota extension on its S3 endpoint
	// (PUT /<bucket>?seaweedfs-quota), signed by an identity allowed
	// s3:PutBucketQuota and s3:GetBucketQuota (an Admin identity). It limits size only,
	// and SeaweedFS enforces it about once a minute by making the bucket read-only.
	AdminAPISeaweedFS AdminAPIType = "SeaweedFS"
)

// AdminAPI is the operator's way to a store's admin API.
type AdminAPI struct {
	// Type says which admin API the store serves.
	Type AdminAPIType `json:"type"`
	// CredentialsSecretRef names the Secret with the admin identity's keys, under
	// accessKeyID and secretAccessKey.
	CredentialsSecretRef SecretReference `json:"credentialsSecretRef"`
}

// StoreGuardrails say what tenants may ask of a store. The defaults allow only what
// cannot reach a bucket the platform team did not hand out: no adoption of existing
// buckets, explicit names only under bucketNamePrefix, no public buckets.
type StoreGuardrails struct {
	// AdoptionAllowedNamespaces selects, by their labels, the namespaces whose
	// StorageBuckets may take over a pre-existing bucket without bucketkeeper tags
	// (spec.adoption: IfUnowned). Absent: no namespace may; an empty selector ({})
	// allows every namespace. Without it, a tenant could claim any untagged bucket the
	// store's credentials reach, such as a Terraform state or audit-log bucket.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="guardrails.adoptionAllowedNamespaces.matchExpressions[].operator must be one of In, NotIn, Exists, DoesNotExist"
	AdoptionAllowedNamespaces *metav1.LabelSelector `json:"adoptionAllowedNamespaces,omitempty"`

	// AdoptionBucketOwner is the owner a pre-existing bucket must have, as the
	// store names it in the bucket's ACL, to be adopted: the account the
	// operator's credentials create buckets as. A bucket of any other identity or
	// account is never adopted, whatever adoptionAllowedNamespaces says: on many
	// stores the operator's credentials see and may write buckets they do not own.
	// Absent, it is the owner ListBuckets names for those credentials, which is
	// their account on AWS (its canonical user ID) and Versity; SeaweedFS and Ceph
	// RGW name the identity there but its account in ACLs, so on them set it (the
	// account ID of the operator's identity in SeaweedFS's S3 configuration; the
	// RGW account ID, RGW followed by 17 digits), or no bucket can be adopted.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	AdoptionBucketOwner string `json:"adoptionBucketOwner,omitempty"`

	// AdoptionSingleAccount is the store admin's statement that this store has one
	// account, the one the operator's credentials act for, so that a bucket whose ACL
	// names no owner is that account's. MinIO is such a store: every bucket there is
	// its deployment's, and its ACLs name no owner, so without this statement no
	// bucket on it can be adopted. It loosens nothing else: a bucket whose ACL names an
	// owner is still held to adoptionBucketOwner (or ListBuckets' owner), one whose ACL
	// is closed to the operator's credentials is still refused, a bucket tagged as
	// another claim's or another cluster's is never taken, and adoptionAllowedNamespaces
	// still decides who may adopt. Set it only where it is true: on a store with
	// several accounts it would let a tenant adopt another account's bucket that names
	// no owner.
	// +optional
	AdoptionSingleAccount bool `json:"adoptionSingleAccount,omitempty"`

	// AllowAnyBucketName lets an explicit spec.bucketName skip bucketNamePrefix. By
	// default, when the store has a prefix, explicit names must start with it, so
	// tenants stay inside the part of the namespace of names the platform team gave them.
	// +optional
	AllowAnyBucketName bool `json:"allowAnyBucketName,omitempty"`

	// AllowBucketNamesOutsideNamespace lets an explicit spec.bucketName create a
	// bucket outside its namespace's lane. By default (false) a name a claim creates
	// must start with "<bucketNamePrefix>-<namespace>-", must not fall in the lane of
	// a namespace whose name extends its own ("team-b" for "team"), and must not end
	// like a derived name (-<8 hex digits>) unless it is the claim's own: otherwise one
	// tenant could take, ahead of time, the name another namespace's claim derives,
	// and learn from the refusal which names exist. A name outside the lane may still
	// adopt an existing bucket where adoptionAllowedNamespaces selects the namespace,
	// and a claim keeps a bucket it already holds. Set it to keep the behaviour before
	// lanes (any name under bucketNamePrefix); allowAnyBucketName implies it.
	// +optional
	AllowBucketNamesOutsideNamespace bool `json:"allowBucketNamesOutsideNamespace,omitempty"`

	// LegacyBucketNames are names outside the lanes and bucketNamePrefix that a bucket
	// moved into this store (spec.move, or a retirement into it) may keep, each with the
	// namespaces whose claims may bring it. Only a claim that holds a bucket of the name
	// already brings it: no new claim creates one. A name a move brings that is not
	// listed is refused (MoveNotAllowed), or, under spec.move.bucketName: Lane, the
	// bucket takes the name a new claim would get in its namespace's lane. Removing a
	// name stalls the claims keeping it here (BucketNameNotAllowed), as any tightened
	// guardrail does.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	LegacyBucketNames []LegacyBucketNames `json:"legacyBucketNames,omitempty"`

	// AllowPublicBuckets lets StorageBuckets set publicAccess: Allowed and bucket
	// policies whose Allow statements grant a principal that is not one specific
	// identity: "*", {"AWS": "*"}, NotPrincipal, no Principal, and every principal of
	// a form the guardrail does not know to name one identity (an ARN with an empty
	// account, which Ceph RGW reads as its anonymous user; "anonymous"; CanonicalUser,
	// Federated and Service principals). Specific are: arn:aws:iam::<account>:root,
	// :user/<name> and :role/<name> with an account, a bare AWS or RGW account ID, and
	// a bare name listed in policyPrincipalAccounts.
	// +optional
	AllowPublicBuckets bool `json:"allowPublicBuckets,omitempty"`

	// PolicyPrincipalAccounts are the store's own accounts, as its principals name
	// them (the account in arn:aws:iam::<account>:user/<name>): AWS account IDs, Ceph
	// RGW tenants or account IDs, SeaweedFS account IDs. When set, an Allow in a
	// bucket policy may name specific principals of these accounts only (anything
	// else is refused, PolicyNotAllowed), and a bare principal equal to one of them
	// counts as that account. Absent, a specific principal of any account is accepted.
	// Set it on AWS, where an account ID may be anyone's, to keep tenants from
	// granting their data to accounts outside the organisation.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.-]*$`
	// +kubebuilder:validation:XValidation:rule="self.all(a, a.lowerAscii() != 'anonymous')",message="guardrails.policyPrincipalAccounts cannot list anonymous: it names no account, but every caller"
	PolicyPrincipalAccounts []string `json:"policyPrincipalAccounts,omitempty"`

	// AllowRebindToRecreatedNamespace lets a retained bucket re-bind to a claim of the
	// same namespace name and claim name in a namespace created since (another UID).
	// By default a retained bucket belongs to the namespace it was retained from, its
	// UID recorded in the bucket's bucketkeeper.io/uid tag: whoever is later given a
	// namespace of the same name does not inherit the old tenant's data. Buckets
	// retained before the namespace's UID was recorded re-bind only with this set.
	// +optional
	AllowRebindToRecreatedNamespace bool `json:"allowRebindToRecreatedNamespace,omitempty"`

	// AllowedDeletionPolicies lists the deletion policies tenants may use. Retain must
	// be among them: it is what a claim falls back to when its own policy is refused.
	// +optional
	// +listType=set
	// +kubebuilder:default={Retain,Delete,Purge}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:XValidation:rule="'Retain' in self",message="guardrails.allowedDeletionPolicies must include Retain: it is what a refused policy falls back to"
	AllowedDeletionPolicies []DeletionPolicy `json:"allowedDeletionPolicies,omitempty"`

	// Quota is the platform team's say on bucket quotas: a default for claims that
	// name none, and a limit no claim may exceed. Claims cannot raise either.
	// +optional
	Quota *StoreQuota `json:"quota,omitempty"`

	// ObjectLock bounds what StorageBuckets may ask of S3 Object Lock on this store,
	// and what their deletion does with locked object versions.
	// +optional
	// +kubebuilder:default={}
	ObjectLock ObjectLockGuardrails `json:"objectLock,omitempty"`

	// Moves say whether buckets may move into or out of this store (a StorageBucket
	// whose objectStoreRef changes under spec.move). Both are allowed by default: a
	// move into the store is held to every other guardrail here, as a new bucket is.
	// +optional
	Moves MoveGuardrails `json:"moves,omitempty"`
}

// ObjectLockGuardrails are the store admin's limits on object lock. A claim asking for
// more is refused (Stalled, reason ObjectLockNotAllowed) before anything is sent to the
// store; a suspended claim is checked too.
type ObjectLockGuardrails struct {
	// AllowedModes are the default-retention modes a StorageBucket may ask for.
	// Governance (the default) keeps data from the application's keys, yet the store's
	// admin (an identity with s3:BypassGovernanceRetention) can still delete it.
	// Compliance cannot be lifted by anyone, the admin included, until the retention
	// ends: allowing it lets tenants make data, and its cost, that nobody can delete
	// for as long as they ask (up to maxRetentionDays). Whatever this allows, the keys
	// handed out never change a retention (no s3:PutObjectRetention): a tenant asks for
	// a longer one through its StorageBucket.
	// +optional
	// +listType=set
	// +kubebuilder:default={Governance}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	AllowedModes []ObjectLockMode `json:"allowedModes,omitempty"`

	// MaxRetentionDays is the longest default retention a StorageBucket may ask for, in
	// days (a year counts 365). Absent: S3's own limit, 100 years.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=36500
	MaxRetentionDays *int32 `json:"maxRetentionDays,omitempty"`

	// PurgeMayBypassGovernance lets deletionPolicy Purge delete object versions locked
	// in Governance mode, with the operator's s3:BypassGovernanceRetention. Off (the
	// default), a Purge deletes what is not locked and waits for the rest. Compliance
	// is never bypassed: no store allows it.
	// +optional
	PurgeMayBypassGovernance bool `json:"purgeMayBypassGovernance,omitempty"`

	// ReleaseBlockedDeletionAfter is how long a deletion blocked by locked object
	// versions keeps its StorageBucket (and so its namespace) waiting. Then the bucket
	// is kept as with deletionPolicy Retain, its locked versions on it, tagged
	// bucketkeeper.io/deletion-blocked for the store's admin, and the StorageBucket
	// goes. 0s releases it at once.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="guardrails.objectLock.releaseBlockedDeletionAfter must be a duration such as 0s, 24h or 720h"
	ReleaseBlockedDeletionAfter *metav1.Duration `json:"releaseBlockedDeletionAfter,omitempty"`
}

// ModeAllowed says whether a StorageBucket may ask for a default retention of mode m.
// An empty list (an object written before the field existed) allows Governance only,
// like the default.
func (g *ObjectLockGuardrails) ModeAllowed(m ObjectLockMode) bool {
	if len(g.AllowedModes) == 0 {
		return m == ObjectLockGovernance
	}
	for _, allowed := range g.AllowedModes {
		if allowed == m {
			return true
		}
	}
	return false
}

// StoreQuota bounds the quotas of a store's buckets.
type StoreQuota struct {
	// Default is the quota of a claim whose spec.quota is absent.
	// +optional
	Default *BucketQuota `json:"default,omitempty"`
	// Max is the most a claim's quota may allow: a claim asking more is refused
	// (Stalled, reason QuotaNotAllowed) and nothing is sent to the store. A limit Max
	// sets holds on every bucket of the store: a claim (or the default) that leaves it
	// out gets Max's value for it.
	// +optional
	Max *BucketQuota `json:"max,omitempty"`
}

// DeletionPolicyAllowed says whether tenants may use p on this store. An empty list
// (an object written before the field existed) allows all three, like the default.
func (g *StoreGuardrails) DeletionPolicyAllowed(p DeletionPolicy) bool {
	if len(g.AllowedDeletionPolicies) == 0 || p == DeletionPolicyRetain || p == "" {
		return true
	}
	for _, allowed := range g.AllowedDeletionPolicies {
		if allowed == p {
			return true
		}
	}
	return false
}

// SecretReference names a Secret in a given namespace.
type SecretReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// StoreHealthCheck configures the store-level health check.
type StoreHealthCheck struct {
	// Interval between two store health checks (a signed ListBuckets).
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="healthCheck.interval must be a duration such as 30s or 5m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('5s') && duration(self) <= duration('1h'))",message="healthCheck.interval must be between 5s and 1h"
	Interval *metav1.Duration `json:"interval,omitempty"`
}

// ObjectStoreStatus is the observed state of an ObjectStore.
type ObjectStoreStatus struct {
	// ObservedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (store reachable with valid credentials), Reconciling,
	// Stalled, AccessProviderReady when accessProvider.type is IAM,
	// WebIdentityReady when accessProvider.webIdentity is set, and Retired when
	// spec.retire is.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastHealthCheckTime is when the store last answered its health check.
	// +optional
	LastHealthCheckTime *metav1.Time `json:"lastHealthCheckTime,omitempty"`

	// WebIdentity is the store's registration of the cluster's issuer, once made
	// (spec.accessProvider.webIdentity).
	// +optional
	WebIdentity *WebIdentityStatus `json:"webIdentity,omitempty"`

	// Retirement counts the buckets of a retiring store (spec.retire) by where they
	// are; the Retired condition says when none is left.
	// +optional
	Retirement *RetirementStatus `json:"retirement,omitempty"`
}

// ObjectStore is a connection to an S3-compatible store, owned by the platform team.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ostore,categories=bucketkeeper
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.endpoint`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Retired",type=string,JSONPath=`.status.conditions[?(@.type=="Retired")].status`,priority=1,description="Whether no bucket is left on a retiring store"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.retire) || self.spec.retire.into != self.metadata.name",message="spec.retire.into names this store itself: a store retires into another"
type ObjectStore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the platform team's: where the store is, the operator's credentials, who
	// may use it, its budget and its guardrails.
	Spec ObjectStoreSpec `json:"spec,omitempty"`
	// Status is the verdict of the store's last health check.
	// The default observedGeneration 0, filled in on every read until the operator
	// writes its first status, makes a new object InProgress to kstatus (and so to
	// GitOps health checks) rather than Current before anyone looked at it.
	// +kubebuilder:default={observedGeneration: 0}
	Status ObjectStoreStatus `json:"status,omitempty"`
}

// ObjectStoreList is a list of ObjectStores.
//
// +kubebuilder:object:root=true
type ObjectStoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ObjectStore `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ObjectStore{}, &ObjectStoreList{})
}
