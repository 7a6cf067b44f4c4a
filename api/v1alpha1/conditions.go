package v1alpha1

// Condition types. Ready, Reconciling and Stalled follow the kstatus conventions so
// that `kubectl wait --for=condition=Ready` and GitOps health checks understand both
// kinds without custom code; the others say which part of the work is done.
const (
	// ConditionReady summarises the object: True when everything asked for is in place.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the operator is still working towards the spec.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when progress needs a human: retrying will not help.
	ConditionStalled = "Stalled"
	// ConditionProvisioned is True when the bucket exists and is owned by this claim.
	ConditionProvisioned = "Provisioned"
	// ConditionConfigured is True when versioning, tags, lifecycle, public access and
	// policy on the bucket match the spec.
	ConditionConfigured = "Configured"
	// ConditionAvailable carries the verdict of the last health probe of the bucket.
	ConditionAvailable = "Available"
	// ConditionSuspended is True while spec.suspend stops all work on a StorageBucket;
	// the other conditions then keep the last verdict.
	ConditionSuspended = "Suspended"
	// ConditionAccessProviderReady is True when a store's IAM endpoint answers and
	// lets the operator manage users.
	ConditionAccessProviderReady = "AccessProviderReady"
)

// Condition reasons: CamelCase, specific enough that a person knows what to do next.
const (
	ReasonReady                    = "Ready"
	ReasonProgressing              = "Progressing"
	ReasonSuspended                = "Suspended"
	ReasonBucketCreated            = "BucketCreated"
	ReasonBucketAdopted            = "BucketAdopted"
	ReasonBucketBound              = "BucketBound"
	ReasonBucketRecreated          = "BucketRecreated"
	ReasonBucketNotOwned           = "BucketNotOwned"
	ReasonOwnedByAnotherClaim      = "OwnedByAnotherClaim"
	ReasonBucketNameTaken          = "BucketNameTaken"
	ReasonBucketNotEmpty           = "BucketNotEmpty"
	ReasonPurging                  = "Purging"
	ReasonDeleting                 = "Deleting"
	ReasonConfigApplied            = "ConfigApplied"
	ReasonNotSupportedByStore      = "NotSupportedByStore"
	ReasonConfigFailed             = "ConfigFailed"
	ReasonObjectStoreNotFound      = "ObjectStoreNotFound"
	ReasonObjectStoreNotReady      = "ObjectStoreNotReady"
	ReasonNamespaceNotAllowed      = "NamespaceNotAllowed"
	ReasonCredentialsMissing       = "CredentialsMissing"
	ReasonCredentialsInvalid       = "CredentialsInvalid"
	ReasonAccessDenied             = "AccessDenied"
	ReasonStoreUnreachable         = "StoreUnreachable"
	ReasonTLSError                 = "TLSError"
	ReasonThrottled                = "Throttled"
	ReasonConnectionSecretConflict = "ConnectionSecretConflict"
	ReasonInUse                    = "InUse"
	ReasonProbeSucceeded           = "ProbeSucceeded"
	ReasonProbeFailed              = "ProbeFailed"
	ReasonProbeTimeout             = "ProbeTimeout"
	ReasonBucketNotFound           = "BucketNotFound"
	ReasonNotProbed                = "NotProbed"
	// ReasonForbidden: the API server refused the operator an action (missing RBAC).
	ReasonForbidden = "Forbidden"

	// Guardrail refusals: each names the ObjectStore guardrail that refused the claim.
	// ReasonAdoptionNotAllowed: guardrails.adoptionAllowedNamespaces does not select
	// this namespace, so a pre-existing bucket cannot be taken over.
	ReasonAdoptionNotAllowed = "AdoptionNotAllowed"
	// ReasonBucketNameNotAllowed: an explicit bucketName lacks the store's
	// bucketNamePrefix and guardrails.allowAnyBucketName is off.
	ReasonBucketNameNotAllowed = "BucketNameNotAllowed"
	// ReasonPublicAccessNotAllowed: publicAccess: Allowed, or a policy granting an
	// anonymous or wildcard principal, without guardrails.allowPublicBuckets.
	ReasonPublicAccessNotAllowed = "PublicAccessNotAllowed"
	// ReasonPolicyNotAllowed: a policy statement reaches beyond this bucket, or the
	// policy is larger than S3 accepts.
	ReasonPolicyNotAllowed = "PolicyNotAllowed"
	// ReasonDeletionPolicyNotAllowed: the deletionPolicy is not among the store's
	// guardrails.allowedDeletionPolicies.
	ReasonDeletionPolicyNotAllowed = "DeletionPolicyNotAllowed"
	// ReasonInvalidTags: a spec.tags key or value leaves S3's tag character set.
	ReasonInvalidTags = "InvalidTags"
	// ReasonOwnedByAnotherCluster: the bucket carries another cluster's tag.
	ReasonOwnedByAnotherCluster = "OwnedByAnotherCluster"

	// Reasons of BucketAccess and of AccessProviderReady.
	ReasonAccessProviderUnavailable = "AccessProviderUnavailable"
	ReasonAccessProviderNotIAM      = "AccessProviderNotIAM"
	ReasonBucketNotReady            = "BucketNotReady"
	ReasonStoreMismatch             = "StoreMismatch"
	ReasonKeyIssued                 = "KeyIssued"
	ReasonRotating                  = "Rotating"
	ReasonSecretConflict            = "SecretConflict"
	ReasonRevoking                  = "Revoking"
)

// Labels, annotations, tags and finalizers the operator owns.
const (
	// Finalizer keeps a StorageBucket (or an ObjectStore in use) until its deletion
	// policy has been carried out against the store.
	Finalizer = "bucketkeeper.io/finalizer"

	// TagClaim and TagUID mark a bucket as owned by one StorageBucket. Only a bucket
	// carrying both for this claim counts as "already ours"; a released bucket keeps
	// TagClaim but loses TagUID, so only a claim with the same namespace/name re-binds.
	TagClaim = "bucketkeeper.io/claim"
	TagUID   = "bucketkeeper.io/uid"
	// TagCluster names the cluster (--cluster-id, default the kube-system namespace's
	// UID) whose operator owns the bucket. A bucket tagged by another cluster sharing
	// the store is never touched, re-bound or purged.
	TagCluster = "bucketkeeper.io/cluster"
	// MaxTagValueLength is S3's limit on a tag value; the claim tag is shortened
	// (with a hash) to stay within it for any namespace and name.
	MaxTagValueLength = 256
	// MaxBucketTags is S3's limit on the tags of one bucket: the spec's, the ownership
	// tags and, on an adopted bucket, the tags it already had, all together.
	MaxBucketTags = 50
	// SystemTagPrefix marks tags the store itself sets (aws:cloudformation:...). They
	// cannot be written back, so they are kept on the bucket and never sent.
	SystemTagPrefix = "aws:"

	// ReservedTagPrefix is the tag-key prefix users may not set themselves.
	ReservedTagPrefix = "bucketkeeper.io/"

	// AnnotationProbeRequestedAt asks for an immediate probe when its value changes
	// (the same convention as Flux's reconcile.fluxcd.io/requestedAt).
	AnnotationProbeRequestedAt = "bucketkeeper.io/probe-requested-at"

	// AnnotationDeletionPolicy set to DeletionPolicyOrphan on a StorageBucket abandons
	// its bucket: deletion removes the finalizer without contacting the store, the way
	// out when the store or its credentials are gone for good. The bucket keeps its
	// tags, so a later claim of the same cluster, namespace and name binds it again.
	AnnotationDeletionPolicy = "bucketkeeper.io/deletion-policy"
	DeletionPolicyOrphan     = "Orphan"

	// AnnotationRotateRequestedAt asks a BucketAccess for a new key when its value
	// changes; the handled value is recorded in status.rotation.lastHandledRequest.
	AnnotationRotateRequestedAt = "bucketkeeper.io/rotate-requested-at"

	// LabelBucketAccess marks the Secret a BucketAccess writes (value: its name).
	LabelBucketAccess = "bucketkeeper.io/bucketaccess"

	// LabelManagedBy marks the Secrets the operator writes; the manager's cache
	// selects Secrets by it so it never caches every Secret in the cluster.
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	LabelManagedByValue = "bucketkeeper"
)

// Keys the connection Secret of a StorageBucket and the Secret of a BucketAccess carry
// besides the endpoint, region and keys, so that an application with only the Secret
// can reach a self-hosted store.
const (
	// SecretKeyCABundle holds the store's spec.caBundle (PEM), present only when the
	// store has one. Mount the Secret as a volume and point AWS_CA_BUNDLE at this key's
	// file: the AWS SDKs read that variable as a path, not as PEM text.
	SecretKeyCABundle = "BUCKET_CA_BUNDLE"
	// SecretKeyForcePathStyle is "true" when the store addresses buckets as
	// endpoint/bucket (spec.forcePathStyle), "false" for virtual-hosted style
	// (bucket.endpoint). Always present.
	SecretKeyForcePathStyle = "BUCKET_FORCE_PATH_STYLE"
)

// CanaryPrefix is where ReadWrite probes write their canary object (named after the
// StorageBucket's UID, deleted after every probe). Event notifications for keys under
// it are ignored by the webhook; filter them out of a bucket's notifications as well.
const CanaryPrefix = ".bucketkeeper/probe/"
