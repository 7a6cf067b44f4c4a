package v1alpha1

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Object lock: what a StorageBucket asks for (spec.objectLock), what its store reports
// (status.objectLock), and what a deletion waits for (status.deletionBlocked). The
// store's side, which bounds them, is ObjectLockGuardrails.

// ObjectLock is a bucket's object lock.
type ObjectLock struct {
	// DefaultRetention is the retention the store gives every object version written
	// without one of its own. Absent: the bucket has object lock, and a version is
	// locked only when a client sets a retention or legal hold on it. Removing it
	// removes the default retention the operator set (the versions already written keep
	// theirs on stores that give each version its own; see docs/object-lock.md for the
	// store that does not); a Compliance one cannot be removed, shortened or turned
	// into Governance.
	// +optional
	DefaultRetention *ObjectLockRetention `json:"defaultRetention,omitempty"`
}

// ObjectLockRetention is a retention mode and its period, in days or years.
//
// +kubebuilder:validation:XValidation:rule="has(self.days) != has(self.years)",message="a retention needs exactly one of days or years"
type ObjectLockRetention struct {
	// Mode of the retention: Governance or Compliance.
	Mode ObjectLockMode `json:"mode"`
	// Days the retention lasts, from when each version is written.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=36500
	Days *int32 `json:"days,omitempty"`
	// Years the retention lasts, from when each version is written.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Years *int32 `json:"years,omitempty"`
}

// RetentionDays is the retention's period in days, a year counted as 365 days: what the
// store guardrail guardrails.objectLock.maxRetentionDays is compared with.
func (r *ObjectLockRetention) RetentionDays() int64 {
	switch {
	case r == nil:
		return 0
	case r.Years != nil:
		return int64(*r.Years) * 365
	case r.Days != nil:
		return int64(*r.Days)
	}
	return 0
}

// String says the retention as a person reads it: "Governance, 30 days".
func (r *ObjectLockRetention) String() string {
	switch {
	case r == nil:
		return "none"
	case r.Years != nil:
		return fmt.Sprintf("%s, %d %s", r.Mode, *r.Years, plural(int64(*r.Years), "year"))
	case r.Days != nil:
		return fmt.Sprintf("%s, %d %s", r.Mode, *r.Days, plural(int64(*r.Days), "day"))
	}
	return string(r.Mode)
}

func plural(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// ObjectLockMode is the mode of an object lock retention.
// +kubebuilder:validation:Enum=Governance;Compliance
type ObjectLockMode string

const (
	// ObjectLockGovernance: a locked version can still be deleted, or its retention
	// shortened, by an identity holding s3:BypassGovernanceRetention that asks for it
	// (the store's admin; never a key bucketkeeper hands out).
	ObjectLockGovernance ObjectLockMode = "Governance"
	// ObjectLockCompliance: nobody, the store's admin included, can delete a locked
	// version or shorten its retention until the retention ends.
	ObjectLockCompliance ObjectLockMode = "Compliance"
)

// BucketObjectLock is a bucket's object lock as its store reports it.
type BucketObjectLock struct {
	// DefaultRetention of the bucket; absent when it has none.
	// +optional
	DefaultRetention *ObjectLockRetention `json:"defaultRetention,omitempty"`
}

// DeletionBlocked says why and until when a deletion waits for locked object versions.
type DeletionBlocked struct {
	// Since is when a pass of the deletion first found nothing left but locked versions.
	Since metav1.Time `json:"since"`
	// LockedVersions is how many locked versions the last complete listing found.
	LockedVersions int64 `json:"lockedVersions"`
	// Until is when the last of them unlocks, as their retention says; absent when a
	// legal hold keeps one (until someone lifts it) or the store reports no retention
	// per version (the bucket's default retention locks them, counted from when it was set).
	// +optional
	Until *metav1.Time `json:"until,omitempty"`
	// ReleaseAt is when the claim stops waiting: the bucket is then kept as with
	// deletionPolicy Retain, tagged bucketkeeper.io/deletion-blocked for the store's
	// admin, and the StorageBucket (and its namespace) can go.
	ReleaseAt metav1.Time `json:"releaseAt"`
}
