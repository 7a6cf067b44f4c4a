package v1alpha1

// RetireSpec retires an ObjectStore into another, its successor: every bucket living
// on the store moves there through the moves of spec.move, bounded and queued as they
// are (guardrails.moves.maxConcurrent of both stores, fair across namespaces). The
// operator never rewrites a StorageBucket's spec: a claim naming the retired store
// keeps naming it, so a GitOps tool applying the tenant's manifest again changes
// nothing, while its bucket lives on the successor (status.objectStore) and its
// StoreRetired condition tells its owner to name the successor at leisure. The
// successor's guardrails hold as for any move into it: a bucket it refuses stays
// where it is, reported and skipped (docs/retiring.md).
type RetireSpec struct {
	// Into names the ObjectStore the buckets go to. Not this store itself.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Into string `json:"into"`
	// Paused starts no new move of the retirement: moves waiting for a slot stay
	// Queued, moves already running finish. Unpaused, the queued moves go on.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// Versions says what the retirement's moves copy of each key, as
	// spec.move.versions does: Current (default) its current version, All every
	// version and delete marker. A claim whose own spec.move asks for All, or whose
	// bucket has object lock, moves every version whatever this says.
	// +optional
	// +kubebuilder:default=Current
	// +kubebuilder:validation:Enum=Current;All
	Versions MoveVersions `json:"versions,omitempty"`
	// UndeclaredSettings is the retirement's choice for the settings a bucket has
	// here that its claim's spec does not declare (spec.move.undeclaredSettings):
	// Carry or Drop. A claim's own spec.move.undeclaredSettings wins over it. Unset,
	// a bucket with such settings and no choice of its own waits, skipped
	// (UndeclaredSettings), until one of the two is set.
	// +optional
	// +kubebuilder:validation:Enum=Carry;Drop
	UndeclaredSettings UndeclaredSettings `json:"undeclaredSettings,omitempty"`
	// BucketName is the retirement's choice for a bucket whose name the successor
	// refuses (spec.move.bucketName): Keep (the default) skips it, MoveNotAllowed;
	// Lane moves it under the name a new claim would get in the successor's lane, its
	// Secrets carrying the new name from the cutover. A claim's own
	// spec.move.bucketName wins over it. Names the successor lists in
	// guardrails.legacyBucketNames are kept either way.
	// +optional
	// +kubebuilder:validation:Enum=Keep;Lane
	BucketName MoveBucketName `json:"bucketName,omitempty"`
}

// RetirementStatus is how far a store's retirement got, counted over the
// StorageBuckets whose spec names the store or whose bucket lives on it. The counts
// are disjoint: every such claim is in one.
type RetirementStatus struct {
	// Into is the successor the counts are of (spec.retire.into).
	Into string `json:"into"`
	// Paused: spec.retire.paused held new moves back when the buckets were counted
	// (their claims count as Queued); a paused retirement makes no progress by choice,
	// which the retirement's alert tells from one that is stuck.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// Moved: claims whose bucket the retirement moved to the successor (or further,
	// where the successor retires too); their spec may still name this store.
	Moved int32 `json:"moved"`
	// Moving: moves of the retirement past Queued, copying or cutting over.
	Moving int32 `json:"moving"`
	// Queued: moves of the retirement waiting for a slot, or held by spec.retire.paused.
	Queued int32 `json:"queued"`
	// Skipped: buckets that cannot follow (the successor's guardrails refuse them, or
	// their move failed); they stay on this store and are tried again after the
	// operator's sync interval, or when either store changes. SkippedClaims names them.
	Skipped int32 `json:"skipped"`
	// Remaining: buckets on this store whose move has not started yet (a claim not
	// reconciled since the retirement began, or one whose bucket is not Ready here).
	Remaining int32 `json:"remaining"`
	// SkippedClaims names the first skipped claims (namespace/name) and why; the
	// claim's StoreRetired condition has the whole message.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	SkippedClaims []RetirementSkip `json:"skippedClaims,omitempty"`
}

// RetirementSkip is one claim a retirement skipped.
type RetirementSkip struct {
	// Claim is the StorageBucket, as namespace/name.
	Claim string `json:"claim"`
	// Reason is the reason of the refusal or failure (MoveNotAllowed, MoveFailed,
	// NamespaceNotAllowed, ...).
	Reason string `json:"reason"`
}

// ClaimRetirement is what a store's retirement does with one claim's bucket: the
// store its spec names retires, and the bucket moves to (or lives on) the successor.
// The operator's own record, since the spec keeps naming the retired store: it keeps
// the bucket where the retirement took it once that store is gone.
type ClaimRetirement struct {
	// From is the retiring store, the one spec.objectStoreRef names.
	From string `json:"from"`
	// Into is the store the retirement takes the bucket to.
	Into string `json:"into"`
	// Paused says the retirement is paused: a move of it not yet started waits.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// Skipped is why the bucket cannot follow, the reason of the refusal or failure
	// (MoveNotAllowed, MoveFailed, ...); empty while it can. The StoreRetired
	// condition's message says it in full.
	// +optional
	Skipped string `json:"skipped,omitempty"`
}
