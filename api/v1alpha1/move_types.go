package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MoveSpec lets spec.objectStoreRef change: the bucket is moved, with its objects, to
// the store it then names. Without it objectStoreRef is immutable, so that a typo in a
// store's name never starts copying a bucket. The move is level-triggered: the store
// the bucket lives on now is status.objectStore, the one it should live on is
// spec.objectStoreRef, and while they differ the operator moves the bucket; setting
// objectStoreRef back before the cutover cancels the move (docs/moving.md).
type MoveSpec struct {
	// Versions says what is copied of each key: Current (default) its current version;
	// All every version and delete marker, oldest first (the target gets versioning
	// Enabled).
	// +optional
	// +kubebuilder:default=Current
	// +kubebuilder:validation:Enum=Current;All
	Versions MoveVersions `json:"versions,omitempty"`
	// DeleteSourceAfter deletes the bucket left on the old store this long after the
	// cutover, with every object and version: never before the target was verified.
	// Absent (the default), the source is kept, its writes denied, until someone
	// deletes it on the store.
	// +optional
	DeleteSourceAfter *metav1.Duration `json:"deleteSourceAfter,omitempty"`
	// UndeclaredSettings says what the move does with lifecycle rules, a bucket
	// policy, tags or CORS the bucket has on the store it leaves while the spec does
	// not declare them: Carry applies them to the target too (held to its guardrails
	// as declared ones), Drop leaves them behind. Unset, there is no default: a move
	// that finds any waits (Stalled, reason UndeclaredSettings, naming them) and
	// creates nothing on the target until one is set (docs/moving.md).
	// +optional
	// +kubebuilder:validation:Enum=Carry;Drop
	UndeclaredSettings UndeclaredSettings `json:"undeclaredSettings,omitempty"`
	// BucketName says what the move does with a bucket name the target refuses (outside
	// its namespace's lane or bucketNamePrefix, and not in its
	// guardrails.legacyBucketNames): Keep refuses the move (MoveNotAllowed) before
	// anything is created there; Lane moves the bucket under the name a new claim would
	// get in the target's lane, and from the cutover the connection Secret and every
	// BucketAccess Secret carry that name (BUCKET_NAME), as status.bucketName does. A
	// name the target accepts is kept either way. Unset: the retirement's
	// (spec.retire.bucketName) where one moves the bucket, else Keep.
	// +optional
	// +kubebuilder:validation:Enum=Keep;Lane
	BucketName MoveBucketName `json:"bucketName,omitempty"`
}

// MoveBucketName says what a move does with a bucket name its target refuses.
type MoveBucketName string

// The choices for a name the target refuses.
const (
	// MoveBucketNameKeep: the bucket keeps its name or does not move.
	MoveBucketNameKeep MoveBucketName = "Keep"
	// MoveBucketNameLane: the bucket moves under the name a new claim would get in the
	// target's lane; applications reading BUCKET_NAME follow, those that hard-code
	// the name do not.
	MoveBucketNameLane MoveBucketName = "Lane"
)

// MoveVersions says which versions of each key a move copies.
type MoveVersions string

// The versions a move copies.
const (
	MoveVersionsCurrent MoveVersions = "Current"
	MoveVersionsAll     MoveVersions = "All"
)

// MovePhase is where a move is.
type MovePhase string

// The phases of a move, in order. A move that was cancelled ends Aborted.
const (
	// MoveQueued: the move waits for a slot: its stores (guardrails.moves.maxConcurrent)
	// or the operator (--max-concurrent-moves) run as many moves as they may at once.
	// Nothing is copied yet; the bucket serves from its home as before.
	MoveQueued MovePhase = "Queued"
	// MovePlanning: the source is listed once for its size and its shards.
	MovePlanning MovePhase = "Planning"
	// MoveCopying: the first pass copies every object.
	MoveCopying MovePhase = "Copying"
	// MoveCatchingUp: further passes copy what the applications changed meanwhile,
	// until a pass has little left to do.
	MoveCatchingUp MovePhase = "CatchingUp"
	// MoveCuttingOver: writes to the source are stopped (a bucket policy denying
	// them), a final pass copies the last changes and verifies both sides equal.
	MoveCuttingOver MovePhase = "CuttingOver"
	// MoveSwitching: the bucket lives on the target (status.objectStore); the
	// connection Secret and every BucketAccess switch to it.
	MoveSwitching MovePhase = "Switching"
	// MoveDone: the bucket is on the target, verified, its Secrets point there; the
	// source bucket is kept, frozen and tagged as moved, or deleted after
	// spec.move.deleteSourceAfter.
	MoveDone MovePhase = "Done"
	// MoveAborted: the move was cancelled before the cutover; the source is as it
	// was, and the target bucket is removed (after TargetKeptUntil, when the move kept
	// it to resume if asked again).
	MoveAborted MovePhase = "Aborted"
)

// MoveStatus is the state of a bucket's last move, read from the stores and the
// mover's checkpoints on every pass.
type MoveStatus struct {
	// ID names the move's checkpoints (ConfigMaps in the operator's namespace).
	ID string `json:"id"`
	// From and To are the ObjectStores the bucket moves between.
	From string `json:"from"`
	To   string `json:"to"`
	// Phase is where the move is.
	Phase MovePhase `json:"phase"`
	// Pass numbers the mover's passes from 1 (the plan).
	Pass int32 `json:"pass"`
	// Boundaries split the source's key space into the shards the passes run as.
	// +optional
	// +kubebuilder:validation:MaxItems=63
	Boundaries []string `json:"boundaries,omitempty"`
	// TotalObjects and TotalBytes are the source's size as the plan listed it.
	// +optional
	TotalObjects int64 `json:"totalObjects,omitempty"`
	// +optional
	TotalBytes int64 `json:"totalBytes,omitempty"`
	// CopiedObjects and CopiedBytes are what every pass has written to the target.
	// +optional
	CopiedObjects int64 `json:"copiedObjects,omitempty"`
	// +optional
	CopiedBytes int64 `json:"copiedBytes,omitempty"`
	// ObjectsLeft is what the running pass has not reached yet, as the plan counts.
	// +optional
	ObjectsLeft int64 `json:"objectsLeft,omitempty"`
	// BytesPerSecond is the running pass's copy rate; Remaining the time it has left
	// at that rate.
	// +optional
	BytesPerSecond int64 `json:"bytesPerSecond,omitempty"`
	// +optional
	Remaining *metav1.Duration `json:"remaining,omitempty"`
	// LastPassChanges is what the last finished pass copied or deleted: the move cuts
	// over once it is small.
	// +optional
	LastPassChanges *int64 `json:"lastPassChanges,omitempty"`
	// CutoverPass is the first final pass of the current cutover: after
	// MoveMaxFinalPasses unverified ones the source takes writes again.
	// +optional
	CutoverPass int32 `json:"cutoverPass,omitempty"`
	// CutoverAttempts counts this move's cutovers whose final passes never found both
	// sides equal: writes went on under the freeze, which was lifted. Each doubles the
	// wait before the next one (CutoverRetryAt).
	// +optional
	CutoverAttempts int32 `json:"cutoverAttempts,omitempty"`
	// CutoverRetryAt is when the move, copying again after such a cutover, may freeze
	// the source again: until then no pass runs.
	// +optional
	CutoverRetryAt *metav1.Time `json:"cutoverRetryAt,omitempty"`
	// StartedAt is when the move was asked for (again, for a cancelled move resumed):
	// queued moves wait in its order; FrozenAt when the source's writes were stopped;
	// SwitchedAt when the bucket's home became the target.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	FrozenAt *metav1.Time `json:"frozenAt,omitempty"`
	// +optional
	SwitchedAt *metav1.Time `json:"switchedAt,omitempty"`
	// WritePause is how long writes were refused: from the freeze to the connection
	// Secret naming the target.
	// +optional
	WritePause *metav1.Duration `json:"writePause,omitempty"`
	// TargetBucket is the bucket the move creates (or created) on the target,
	// recorded before CreateBucket is sent: what proves an untagged bucket there is
	// this move's own work after a crash.
	// +optional
	TargetBucket string `json:"targetBucket,omitempty"`
	// TargetKeptOn and TargetKeptUntil: a move cancelled after its plan keeps its
	// target bucket on ObjectStore TargetKeptOn (To), and its checkpoints, until
	// TargetKeptUntil: asked again before then, the same move resumes without copying
	// again what it verified there. Then, or once the claim is deleted, the target
	// bucket is emptied and deleted and both fields cleared.
	// +optional
	TargetKeptOn string `json:"targetKeptOn,omitempty"`
	// +optional
	TargetKeptUntil *metav1.Time `json:"targetKeptUntil,omitempty"`
	// Undeclared names the settings the move's plan found on the source that the
	// spec does not declare (with their counts, never their values): what
	// UndeclaredSettings decided about.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=64
	Undeclared []string `json:"undeclared,omitempty"`
	// UndeclaredSettings is the choice the move made of them (Carry or Drop: the
	// claim's spec.move.undeclaredSettings, else its retirement's); empty while it
	// waits for one, or when it found none.
	// +optional
	UndeclaredSettings UndeclaredSettings `json:"undeclaredSettings,omitempty"`
	// Carried is what the move carried to its target bucket (UndeclaredSettings:
	// Carry); it becomes status.carried when the bucket's home switches there.
	// +optional
	Carried *CarriedSettings `json:"carried,omitempty"`
	// SourceBucket is the bucket's name on the store it left (From), set at the cutover
	// of a move that renamed it (spec.move.bucketName: Lane); its name on To is
	// TargetBucket, and status.bucketName from then on. Empty, the name did not change.
	// +optional
	SourceBucket string `json:"sourceBucket,omitempty"`
	// SourceDeleted says the bucket left on the old store was deleted
	// (spec.move.deleteSourceAfter).
	// +optional
	SourceDeleted bool `json:"sourceDeleted,omitempty"`
	// Message says what the move does or waits for, in words.
	// +optional
	Message string `json:"message,omitempty"`
}

// Terminal says whether the move ended (Done or Aborted).
func (m *MoveStatus) Terminal() bool {
	return m == nil || m.Phase == MoveDone || m.Phase == MoveAborted
}

// WritesFrozen says whether a move's cutover denies the object writes of the bucket on
// its home store: the freeze is in place (FrozenAt) and the home is still the source.
// Where the store's bucket policies bind no key (MinIO), the keys the operator issued
// on it carry the freeze in their own policies while this holds.
func (sb *StorageBucket) WritesFrozen() bool {
	m := sb.Status.Move
	return !m.Terminal() && m.FrozenAt != nil && m.From == sb.HomeStore()
}

// Admitted says whether the move holds a slot of its stores: it is past Queued and
// not ended.
func (m *MoveStatus) Admitted() bool {
	return !m.Terminal() && m.Phase != MoveQueued
}

// KeptTarget says whether a cancelled move keeps its target bucket (TargetKeptOn).
func (m *MoveStatus) KeptTarget() bool {
	return m != nil && m.Phase == MoveAborted && m.TargetKeptOn != ""
}

// HomeStore is the ObjectStore the bucket lives on now: status.objectStore once the
// operator recorded it, else the store its first CreateBucket was sent to (which may
// still make it there), else spec.objectStoreRef. It differs from spec.objectStoreRef
// only while the bucket moves.
func (sb *StorageBucket) HomeStore() string {
	if sb.Status.ObjectStore != "" {
		return sb.Status.ObjectStore
	}
	if i := sb.Status.CreateIntent; i != nil && i.UID == sb.UID && i.ObjectStore != "" {
		return i.ObjectStore // a CreateBucket sent there may still land: see CreateIntent
	}
	return sb.Spec.ObjectStoreRef.Name
}

// MoveGuardrails let a store's admin forbid moves into or out of a store.
type MoveGuardrails struct {
	// Into: Allowed (default) lets a claim whose namespace may use this store move
	// its bucket here; Forbidden refuses (MoveNotAllowed) before anything is created.
	// +optional
	// +kubebuilder:default=Allowed
	// +kubebuilder:validation:Enum=Allowed;Forbidden
	Into MovePermission `json:"into,omitempty"`
	// OutOf: Allowed (default) lets a claim move its bucket from this store to
	// another; Forbidden refuses (MoveNotAllowed).
	// +optional
	// +kubebuilder:default=Allowed
	// +kubebuilder:validation:Enum=Allowed;Forbidden
	OutOf MovePermission `json:"outOf,omitempty"`
	// MaxParallelism is the most mover pods (shards) of one pass of a move into or
	// out of this store that run at once; a move between two stores runs at the
	// smaller of theirs, and never above the operator's --mover-parallelism. Unset:
	// one per shard.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	MaxParallelism *int32 `json:"maxParallelism,omitempty"`
	// MaxConcurrent is the most moves into or out of this store that run at once
	// (from Planning to Switching): a move beyond it waits in phase Queued, in an
	// order fair across namespaces, and the moves running share half of the store's
	// requestsPerSecond, each getting that half divided by MaxConcurrent. With
	// several operator shards, each runs at most MaxConcurrent divided by the shards
	// (at least one). Unset: 2.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	MaxConcurrent *int32 `json:"maxConcurrent,omitempty"`
	// MaxMoverCPU and MaxMoverMemory cap each mover pod of a move into or out of this
	// store (its requests and limits): a pod gets the smallest of the two stores' caps
	// and the operator's --mover-cpu and --mover-memory. A move whose memory cap is
	// below what a mover needs (64Mi) is refused (MoveNotAllowed). Movers that run
	// in the operator's process (--mover=in-process) have no pods to cap.
	// +optional
	MaxMoverCPU *resource.Quantity `json:"maxMoverCPU,omitempty"`
	// MaxMoverMemory caps each mover pod's memory, as MaxMoverCPU its CPU; at least
	// 64Mi, or moves into and out of this store are refused.
	// +optional
	MaxMoverMemory *resource.Quantity `json:"maxMoverMemory,omitempty"`
}

// MovePermission allows or forbids moves.
type MovePermission string

// The move permissions.
const (
	MoveAllowed   MovePermission = "Allowed"
	MoveForbidden MovePermission = "Forbidden"
)
