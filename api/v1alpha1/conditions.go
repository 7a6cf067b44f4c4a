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
	// ConditionConfigured is True when versioning, tags, lifecycle, public access,
	// policy and CORS on the bucket match the spec.
	ConditionConfigured = "Configured"
	// ConditionAvailable carries the verdict of the last health probe of the bucket.
	ConditionAvailable = "Available"
	// ConditionSuspended is True while spec.suspend stops all work on a StorageBucket;
	// the other conditions then keep the last verdict.
	ConditionSuspended = "Suspended"
	// ConditionAccessProviderReady is True when a store's IAM endpoint answers and
	// lets the operator manage users.
	ConditionAccessProviderReady = "AccessProviderReady"
	// ConditionAdminAPIReady is True when a store's spec.adminAPI answers and lets the
	// operator read buckets' quotas.
	ConditionAdminAPIReady = "AdminAPIReady"
	// ConditionWebIdentityReady is True when a store trusts the cluster's
	// ServiceAccount tokens (spec.accessProvider.webIdentity): the issuer is
	// registered as its OpenID Connect provider and it keeps roles' inline policies.
	ConditionWebIdentityReady = "WebIdentityReady"
	// ConditionStoreRetired, on a StorageBucket, is True while the store its spec
	// names retires (ObjectStore spec.retire) and once the retirement moved the
	// bucket: its reason says where the bucket is, its message what the owner may do
	// (name the successor in spec.objectStoreRef, at leisure). It is informational:
	// it never makes the claim not Ready, and kstatus does not read it.
	ConditionStoreRetired = "StoreRetired"
	// ConditionRetired, on an ObjectStore with spec.retire, is True once no bucket
	// lives on the store, nor moves to or from it: deleting it is then safe.
	ConditionRetired = "Retired"
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
	// bucketNamePrefix and guardrails.allowAnyBucketName is off, or would create a
	// bucket outside the namespace's lane (guardrails.allowBucketNamesOutsideNamespace).
	ReasonBucketNameNotAllowed = "BucketNameNotAllowed"
	// ReasonPublicAccessNotAllowed: publicAccess: Allowed, or a policy granting a
	// principal that is not one specific identity (anonymous, a wildcard, a form the
	// guardrail does not know), without guardrails.allowPublicBuckets.
	ReasonPublicAccessNotAllowed = "PublicAccessNotAllowed"
	// ReasonPolicyNotAllowed: the policy breaks the strict grammar (an unknown,
	// case-variant or repeated key, say), a statement reaches beyond this bucket or
	// names an action that is not a data-plane one (an Allow or a Deny), a Deny uses
	// NotPrincipal, an Allow names an account outside guardrails.policyPrincipalAccounts,
	// or the policy is larger than S3 accepts. The message names the key, statement,
	// action or principal.
	ReasonPolicyNotAllowed = "PolicyNotAllowed"
	// ReasonWithdrawalRefused: a guardrail refuses the claim (PublicAccessNotAllowed or
	// PolicyNotAllowed), and the store refused the operator's removal of what it
	// forbids from the bucket (the public-access block, the policy): what the store
	// did not let it remove is still there. The message names the bucket, the calls
	// refused and the guardrail's own refusal; the store admin removes it by hand.
	ReasonWithdrawalRefused = "WithdrawalRefused"
	// ReasonDeletionPolicyNotAllowed: the deletionPolicy is not among the store's
	// guardrails.allowedDeletionPolicies.
	ReasonDeletionPolicyNotAllowed = "DeletionPolicyNotAllowed"
	// ReasonInvalidTags: a spec.tags key or value leaves S3's tag character set.
	ReasonInvalidTags = "InvalidTags"
	// ReasonQuotaNotAllowed: spec.quota exceeds the store's guardrails.quota.max, or
	// sets a limit below one byte or object.
	ReasonQuotaNotAllowed = "QuotaNotAllowed"
	// ReasonObjectLockNotAllowed: spec.objectLock asks for a default retention mode
	// outside the store's guardrails.objectLock.allowedModes (Compliance, by default),
	// or for a retention longer than its guardrails.objectLock.maxRetentionDays.
	ReasonObjectLockNotAllowed = "ObjectLockNotAllowed"
	// ReasonDeletionBlocked: the deletion policy deleted what it could, and the rest of
	// the bucket is object versions under a retention or legal hold; the message says
	// until when, and when the claim stops waiting (status.deletionBlocked).
	ReasonDeletionBlocked = "DeletionBlocked"
	// ReasonAdminAPIUnavailable: the store's adminAPI does not answer, or refuses the
	// operator's admin identity.
	ReasonAdminAPIUnavailable = "AdminAPIUnavailable"
	// ReasonOwnedByAnotherCluster: the bucket carries another cluster's tag.
	ReasonOwnedByAnotherCluster = "OwnedByAnotherCluster"
	// ReasonCreateUnanswered: a deletion waits because a CreateBucket of this claim
	// went unanswered (a timeout, a dropped connection, a server error) and the store
	// may still carry it out; "the bucket is not there" proves nothing until it no
	// longer can. The message says until when; the deletion then checks again.
	ReasonCreateUnanswered = "CreateUnanswered"

	// Reasons of BucketAccess and of AccessProviderReady.
	ReasonAccessProviderUnavailable = "AccessProviderUnavailable"
	ReasonAccessProviderNotIAM      = "AccessProviderNotIAM"
	ReasonBucketNotReady            = "BucketNotReady"
	ReasonStoreMismatch             = "StoreMismatch"
	ReasonKeyIssued                 = "KeyIssued"
	ReasonRotating                  = "Rotating"
	ReasonSecretConflict            = "SecretConflict"
	ReasonRevoking                  = "Revoking"
	// ReasonBucketRefused: a StorageBucket of the access is Stalled by a guardrail of
	// its store (e.g. NamespaceNotAllowed), so the access's key was revoked.
	ReasonBucketRefused = "BucketRefused"

	// Reasons of keyless access (WebIdentityReady, and a BucketAccess for a
	// ServiceAccount).
	// ReasonIssuerUnreachable: the operator could not read the issuer's discovery
	// document or key set (to compute its thumbprint, or to check that it publishes
	// this cluster's keys alone), or the keys this cluster's API server publishes.
	ReasonIssuerUnreachable = "IssuerUnreachable"
	// ReasonIssuerShared: the issuer's key set holds a key this cluster's API server
	// does not publish, so another cluster signing under the same issuer could assume
	// this cluster's roles: the store is not trusted for keyless access, and the roles
	// of its accesses are deleted until the key set is the cluster's alone.
	ReasonIssuerShared = "IssuerShared"
	// ReasonWebIdentityNotConfigured: the access names a ServiceAccount, and its
	// store has no accessProvider.webIdentity.
	ReasonWebIdentityNotConfigured = "WebIdentityNotConfigured"
	// ReasonWebIdentityNotReady: the access names a ServiceAccount, and its store's
	// WebIdentityReady is not True (yet); the message says why.
	ReasonWebIdentityNotReady = "WebIdentityNotReady"
	// ReasonRoleIssued: the access's role admits its ServiceAccount (an Event).
	ReasonRoleIssued = "RoleIssued"

	// Reasons of a move between stores (spec.move).
	// ReasonMoving: the bucket is being moved to another store (Reconciling=True while
	// it runs; an Event at each phase). status.move says where it is.
	ReasonMoving = "Moving"
	// ReasonMoved: a move ended with the bucket verified on its new store (an Event).
	ReasonMoved = "Moved"
	// ReasonMoveAborted: a move was cancelled before its cutover and undone (an Event).
	ReasonMoveAborted = "MoveAborted"
	// ReasonMoveNotAllowed: the target store's guardrails refuse the move (its
	// guardrails.moves, allowedNamespaces, or a quota the source's data exceeds), or the
	// source's guardrails.moves forbids moving out; nothing was created on the target.
	ReasonMoveNotAllowed = "MoveNotAllowed"
	// ReasonMoveFailed: objects could not be copied (unreadable on the source, refused
	// by the target): the move does not cut over; the message counts them and names
	// the first few keys.
	ReasonMoveFailed = "MoveFailed"
	// ReasonWritesDuringFreeze: the final passes of a move's cutover never found both
	// sides equal, as the bucket was written under the freeze by keys the store's
	// freeze does not stop (the message names them): the freeze was lifted, the move
	// copies again and cuts over again later, each time after a longer wait.
	ReasonWritesDuringFreeze = "WritesDuringFreeze"
	// ReasonUndeclaredSettings: the bucket has settings on the store it leaves that
	// the spec does not declare (lifecycle rules, a policy, tags, CORS), and neither
	// spec.move.undeclaredSettings nor its retirement's says whether to carry or drop
	// them: the move waits, nothing created on the target; the message names them.
	ReasonUndeclaredSettings = "UndeclaredSettings"

	// Reasons of a store's retirement (ObjectStore spec.retire): of a claim's
	// StoreRetired condition and of the store's Retired condition.
	// ReasonRetiring: the retirement moves the bucket, or waits for a slot to (the
	// claim), or buckets are still on the store (the store).
	ReasonRetiring = "Retiring"
	// ReasonRetirementPaused: spec.retire.paused holds the bucket's move back.
	ReasonRetirementPaused = "RetirementPaused"
	// ReasonRetirementSkipped: the bucket cannot follow the retirement (the
	// successor's guardrails refuse it, or its move failed): it stays where it is,
	// served as before, and is tried again.
	ReasonRetirementSkipped = "RetirementSkipped"
	// ReasonRetired: the bucket lives on the successor (the claim), or no bucket is
	// left on the store (the store).
	ReasonRetired = "Retired"
	// ReasonObjectStoreRetiring: a new claim names a retiring store, which creates no
	// new bucket: name its successor.
	ReasonObjectStoreRetiring = "ObjectStoreRetiring"
)

// Reasons of Events that no condition carries: what the deletion of a StorageBucket
// did to its bucket. (Every other Event's reason is the condition reason above.)
const (
	EventReasonBucketDeleted     = "BucketDeleted"
	EventReasonBucketReleased    = "BucketReleased"
	EventReasonBucketLeftAlone   = "BucketLeftAlone"
	EventReasonBucketNotReleased = "BucketNotReleased"
	EventReasonBucketAbandoned   = "BucketAbandoned"
	// EventReasonBucketAbsent: the store answered that the bucket does not exist, at a
	// moment when no CreateBucket of the claim could still make it: nothing to delete.
	EventReasonBucketAbsent = "BucketAbsent"

	// EventReasonReceiverKeyInvalid: a Secret labelled as a probe-webhook key is
	// malformed (no or a short HMAC key, no or an invalid namespace list) and is not
	// used; the Warning, on the Secret, says what is wrong, never the key.
	EventReasonReceiverKeyInvalid = "ReceiverKeyInvalid"
)
