package v1alpha1

// UndeclaredSettings says what a move does with the settings its bucket has on the
// store it leaves that the claim's spec does not declare: lifecycle rules, a bucket
// policy, tags, CORS found there (set by the store's admin, or on a bucket adopted
// with them) while the spec leaves them out. A move configures its target from the
// spec, so without a choice it would leave them behind unseen: a move that finds any
// waits, in phase Queued with Stalled=True (reason UndeclaredSettings) naming them,
// and creates nothing on the target until one is made (docs/moving.md).
type UndeclaredSettings string

// The choices for the settings a move finds undeclared.
const (
	// UndeclaredSettingsCarry applies them to the target bucket before the cutover,
	// held to the target's guardrails as if the spec declared them (a policy the
	// target would refuse fails the move, MoveNotAllowed, before anything is created
	// there). status.carried records them: on the new home they are the bucket's
	// effective settings beside the spec's, never drift to remove.
	UndeclaredSettingsCarry UndeclaredSettings = "Carry"
	// UndeclaredSettingsDrop leaves them behind, on the source bucket only; the move
	// goes on as if they were not there, and status.move.undeclared names them.
	UndeclaredSettingsDrop UndeclaredSettings = "Drop"
)

// The names of the settings a move may find undeclared, as status.move.undeclared and
// the UndeclaredSettings condition name them (with their counts, never their values).
const (
	UndeclaredSettingTags      = "tags"
	UndeclaredSettingLifecycle = "lifecycle"
	UndeclaredSettingPolicy    = "policy"
	UndeclaredSettingCORS      = "CORS"
)

// CarriedSettings are the settings a move carried to the bucket's new home
// (spec.move.undeclaredSettings or spec.retire.undeclaredSettings: Carry) that the
// spec does not declare. With the spec, they are the bucket's effective configuration
// there: the configuration step does not take them for drift, even on a bucket the
// claim created (where whatever the spec leaves out is otherwise removed), and leaves
// them as they are. Only on ObjectStore: once the bucket lives elsewhere they are
// nobody's record, and a later move finds and decides on them afresh. A setting the
// spec comes to declare is the spec's from then on and leaves this record (a tag key,
// a rule ID, the policy, CORS). It lives in status, which tenants cannot write.
type CarriedSettings struct {
	// ObjectStore is the store the move carried them to.
	ObjectStore string `json:"objectStore"`
	// TagKeys are the keys of the tags carried, recorded as status.applied records
	// them (AppliedNameMaxLength).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MaxLength=32
	TagKeys []string `json:"tagKeys,omitempty"`
	// LifecycleRules are the IDs of the lifecycle rules carried, recorded alike.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=32
	LifecycleRules []string `json:"lifecycleRules,omitempty"`
	// Policy: the bucket policy was carried.
	// +optional
	Policy bool `json:"policy,omitempty"`
	// CORS: the CORS configuration was carried.
	// +optional
	CORS bool `json:"cors,omitempty"`
}
