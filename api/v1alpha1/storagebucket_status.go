package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// StorageBucketStatus is the observed state of a StorageBucket.
type StorageBucketStatus struct {
	// ObservedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Reconciling, Stalled, Provisioned, Configured, Available.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// BucketName is the name of the bucket on the store.
	// +optional
	BucketName string `json:"bucketName,omitempty"`
	// Endpoint is the store's S3 URL applications should use.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// Region the bucket lives in.
	// +optional
	Region string `json:"region,omitempty"`
	// ObjectStore is the ObjectStore the bucket lives on now. It differs from
	// spec.objectStoreRef while the bucket moves (status.move), and once a
	// retirement of the store the spec names moved it (status.retirement).
	// +optional
	ObjectStore string `json:"objectStore,omitempty"`
	// Retirement is set while the ObjectStore spec.objectStoreRef names retires (its
	// spec.retire), and once it took the bucket to its successor: where the bucket
	// goes, and whether it is skipped.
	// +optional
	Retirement *ClaimRetirement `json:"retirement,omitempty"`
	// Move is the bucket's last move between stores, while it runs and after.
	// +optional
	Move *MoveStatus `json:"move,omitempty"`
	// LeftBehind names the ObjectStores holding a copy of the bucket, frozen, that a
	// finished move left on its old home: the claim's deletion policy applies to
	// them too (Purge deletes them, Retain and Delete release them), and
	// spec.move.deleteSourceAfter deletes the last one. A copy named otherwise than
	// the bucket is now (a move renamed it since: spec.move.bucketName: Lane) is
	// listed as "<store>/<bucket>".
	// +optional
	// +listType=set
	LeftBehind []string `json:"leftBehind,omitempty"`
	// ConnectionSecretName is the Secret holding the connection details.
	// +optional
	ConnectionSecretName string `json:"connectionSecretName,omitempty"`

	// Available is the verdict of the last probe; absent until the first one.
	// +optional
	Available *bool `json:"available,omitempty"`
	// LastProbeTime is when the bucket was last probed. To spare the API server, it
	// is written when the verdict changes and otherwise refreshed at most once per
	// --status-heartbeat (default 5m); the time of every successful probe is in the
	// bucketkeeper_bucket_last_successful_probe_timestamp_seconds metric.
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`
	// LastProbeLatency is how long the last written probe took.
	// +optional
	LastProbeLatency *metav1.Duration `json:"lastProbeLatency,omitempty"`
	// ConsecutiveProbeFailures counts failed probes since the last success.
	// +optional
	ConsecutiveProbeFailures int32 `json:"consecutiveProbeFailures,omitempty"`
	// CreateIntent records, before CreateBucket is sent, the bucket this object is
	// about to create. A manager that dies between creating and tagging the bucket, or
	// a claim deleted at that moment, finds an untagged bucket; this record is what
	// proves it is this object's own work. It lives in status, which tenants cannot
	// write, and names the object's UID, so it cannot be forged or inherited.
	// +optional
	CreateIntent *CreateIntent `json:"createIntent,omitempty"`
	// Applied records which configuration the operator itself has set on the bucket,
	// so that what the spec later drops is removed and what the operator never set
	// (found on an adopted bucket) is left alone. It lives in status, which tenants
	// cannot write, and so survives restarts and leader changes.
	// +optional
	Applied *AppliedConfiguration `json:"applied,omitempty"`
	// Carried records the settings a move carried to the bucket's home that the spec
	// does not declare (spec.move.undeclaredSettings: Carry): the configuration step
	// leaves them in place there rather than remove them as drift.
	// +optional
	Carried *CarriedSettings `json:"carried,omitempty"`
	// LastHandledProbeRequest is the last value of the
	// bucketkeeper.io/probe-requested-at annotation that was acted on.
	// +optional
	LastHandledProbeRequest string `json:"lastHandledProbeRequest,omitempty"`

	// Usage is what the bucket holds, as its store last counted it, on stores whose
	// admin API reports it (see ObjectStore spec.adminAPI). It is measured with the
	// bucket's probe at most every --usage-interval and written here only when a
	// figure moved by 1% or more (any change from or to zero), or an hour after the
	// last write: it lags the store by design. The metrics
	// bucketkeeper_bucket_usage_bytes and _objects follow every measurement.
	// +optional
	Usage *BucketUsage `json:"usage,omitempty"`

	// ObjectLock is the bucket's object lock as its store reported it at the last sync:
	// present when the bucket has object lock, because the spec asked for it or because
	// the bucket had it when it was adopted (object lock cannot be turned off).
	// +optional
	ObjectLock *BucketObjectLock `json:"objectLock,omitempty"`

	// DeletionBlocked is present while the deletion policy cannot finish because object
	// versions on the bucket are locked: what unlocks them and when the claim stops
	// waiting (the store's guardrails.objectLock.releaseBlockedDeletionAfter).
	// +optional
	DeletionBlocked *DeletionBlocked `json:"deletionBlocked,omitempty"`
}

// BucketUsage is a bucket's size and object count as its store counts them.
type BucketUsage struct {
	// Bytes is the size of the bucket's objects.
	Bytes int64 `json:"bytes"`
	// Objects is the number of objects.
	Objects int64 `json:"objects"`
	// MeasuredAt is when the store gave these figures.
	MeasuredAt metav1.Time `json:"measuredAt"`
	// Figure says which size the store reports: Logical (the objects' own sizes, what
	// quotas count) or Physical (what they take on disk, replicas included).
	// +kubebuilder:validation:Enum=Logical;Physical
	Figure UsageFigure `json:"figure"`
}

// UsageFigure says which size a store's usage reports.
type UsageFigure string

// UsageFigures.
const (
	// UsageLogical is the size of the objects as written, what quotas count.
	UsageLogical UsageFigure = "Logical"
	// UsagePhysical is what the objects take on the store's disks.
	UsagePhysical UsageFigure = "Physical"
)

// CreateIntent is a bucket creation this StorageBucket started.
type CreateIntent struct {
	// BucketName is the bucket CreateBucket was (about to be) sent for.
	BucketName string `json:"bucketName"`
	// UID is the StorageBucket's UID when the intent was recorded.
	UID types.UID `json:"uid"`
	// ObjectStore is the ObjectStore CreateBucket was sent to. Until the bucket is
	// provisioned (status.objectStore), it is the bucket's home: a change of
	// spec.objectStoreRef meanwhile moves the bucket from there once it is made,
	// rather than forgetting a CreateBucket that may still land. Empty in an intent
	// recorded by a version before this field.
	// +optional
	ObjectStore string `json:"objectStore,omitempty"`
	// SentAt is when the latest CreateBucket of this intent was sent, recorded (to the
	// second) just before sending it. A CreateBucket whose answer was lost may still be
	// carried out by the store after the operator stopped waiting for it; until that
	// can no longer happen, a deletion does not take "the bucket is not there" for
	// "there is nothing to delete". Empty in an intent recorded by a version before
	// this field.
	// +optional
	SentAt *metav1.Time `json:"sentAt,omitempty"`
	// Answered says the store answered the CreateBucket sent at sentAt. Only an
	// unanswered one may still land, so a process that did not see the answer (after a
	// restart or a change of leader) need not wait, on a deletion, for one that did.
	// +optional
	Answered bool `json:"answered,omitempty"`
	// LandBy, set with answered, is until when an earlier CreateBucket of this intent
	// that went unanswered may still land; empty when none can.
	// +optional
	LandBy *metav1.Time `json:"landBy,omitempty"`
}

// AppliedConfiguration is the operator's record of what it set on a bucket, kept compact
// because every bucket's copy is held in memory: names, not values (the values are the
// spec's), and names longer than AppliedNameMaxLength as a short digest.
//
// A bucket this StorageBucket created itself (status.createIntent names it) holds
// nothing foreign: everything on it is the operator's to keep in line with the spec, so
// its tag keys and rule IDs are not listed. Only an adopted or re-bound bucket lists them.
type AppliedConfiguration struct {
	// TagKeys are the spec tag keys the operator set on an adopted bucket.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=47
	// +kubebuilder:validation:items:MaxLength=32
	TagKeys []string `json:"tagKeys,omitempty"`
	// LifecycleRules are the IDs of the lifecycle rules the operator set on an
	// adopted bucket.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=32
	LifecycleRules []string `json:"lifecycleRules,omitempty"`
	// Policy: the bucket policy is the operator's (set from the spec).
	// +optional
	Policy bool `json:"policy,omitempty"`
	// CORS: the bucket's CORS configuration is the operator's (set from the spec).
	// +optional
	CORS bool `json:"cors,omitempty"`
	// Versioning: the operator set the bucket's versioning.
	// +optional
	Versioning bool `json:"versioning,omitempty"`
	// Quota: the operator set the bucket's quota.
	// +optional
	Quota bool `json:"quota,omitempty"`
	// ObjectLockRetention: the operator set the bucket's default retention.
	// +optional
	ObjectLockRetention bool `json:"objectLockRetention,omitempty"`
	// Hash digests the configuration last brought in line in full (settings, ownership
	// tags, bucket name, region and endpoint). After a restart, a bucket whose desired
	// configuration still has this hash is not re-read at once but at its own moment
	// within the sync interval, so a failover does not re-read every bucket at once.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Hash string `json:"hash,omitempty"`
}

// AppliedNameMaxLength is the longest tag key or rule ID recorded as itself in
// status.applied; a longer one is recorded as "#" and 16 hex digits of its SHA-256, which
// bounds the record to about 5 KiB even with 47 tags and 100 rules of the longest names.
// "#" is outside S3's tag character set, so a digest never reads as a tag key.
const AppliedNameMaxLength = 32
