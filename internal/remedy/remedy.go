package remedy

import (
	"slices"
	"strings"
)

// State says whether a reason needs anyone.
type State string

const (
	// Fine: the reason reports work done as asked; nothing to do.
	Fine State = "fine"
	// Waiting: the operator is at work or retrying, and will get there by itself; a
	// person looks only when it lasts.
	Waiting State = "waiting"
	// Blocked: retrying cannot help; a person must change something.
	Blocked State = "blocked"
)

// Actor is who can act on a reason. The split follows the threat model: the
// application team owns its StorageBuckets, BucketAccesses and Secrets, the platform
// team owns the ObjectStores, their credentials and the store itself.
type Actor string

const (
	// Nobody needs to act.
	Nobody Actor = ""
	// Owner is the application team that owns the StorageBucket or BucketAccess.
	Owner Actor = "you"
	// Platform is the platform team that owns the ObjectStore and the store.
	Platform Actor = "the platform team"
	// Either: the owner or the platform team, as the message says.
	Either Actor = "you or the platform team"
)

// Remedy is what one reason means and what to do about it.
type Remedy struct {
	Reason string
	State  State
	Who    Actor
	// Guardrail names the ObjectStore setting that refused the claim, for the
	// refusals of the platform team's guardrails.
	Guardrail string
	// Means says what happened, in a person's words; the condition's message adds the
	// particulars (which bucket, setting, Secret).
	Means string
	// Do says what to do about it.
	Do string
}

// For returns the remedy of reason; ok is false for a reason this table does not know
// (a newer operator than the tool that asks).
func For(reason string) (r Remedy, ok bool) {
	i, found := slices.BinarySearchFunc(sorted, reason, func(r Remedy, reason string) int { return strings.Compare(r.Reason, reason) })
	if !found {
		return Remedy{Reason: reason}, false
	}
	return sorted[i], true
}

// All returns every remedy, by reason.
func All() []Remedy { return slices.Clone(sorted) }

// sorted is table by reason, for For's binary search and a stable docs order.
var sorted = func() []Remedy {
	s := slices.Clone(table)
	slices.SortFunc(s, func(a, b Remedy) int { return strings.Compare(a.Reason, b.Reason) })
	return s
}()
