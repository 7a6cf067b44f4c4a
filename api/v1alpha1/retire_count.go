package v1alpha1

import apimeta "k8s.io/apimachinery/pkg/api/meta"

// Where one claim stands in a store's retirement: the count of RetirementStatus it
// is counted in (RetirementStateOf). Plain strings, not a type of their own: they
// are no field of the API.
const (
	// RetirementNotCounted: the claim neither holds the store nor was moved off it
	// by its retirement.
	RetirementNotCounted = ""
	RetirementMoved      = "Moved"
	RetirementMoving     = "Moving"
	RetirementQueued     = "Queued"
	RetirementSkipped    = "Skipped"
	RetirementRemaining  = "Remaining"
)

// RetirementStateOf sorts one claim of a retiring store by where its bucket is. The
// operator's count (status.retirement) and the kubectl plugin's both use it, so that
// the same claims always give the same counts, whoever counts them.
func RetirementStateOf(sb *StorageBucket, store string) string {
	rec, m := sb.Status.Retirement, sb.Status.Move
	retiring := rec != nil && rec.From == store
	if !sb.UsesStore(store) {
		if retiring {
			return RetirementMoved
		}
		return RetirementNotCounted
	}
	leaving := !m.Terminal() && m.From == store
	switch {
	case retiring && rec.Skipped != "":
		return RetirementSkipped
	case leaving && m.Admitted():
		return RetirementMoving
	case leaving && m.Phase == MoveQueued && !apimeta.IsStatusConditionTrue(sb.Status.Conditions, ConditionStalled):
		return RetirementQueued
	}
	return RetirementRemaining
}

// maxSkippedClaims is how many skipped claims RetirementStatus names (its MaxItems).
const maxSkippedClaims = 20

// CountRetirement counts the claims of a retiring store (spec.retire set) by
// RetirementStateOf; users counts those that still hold the store (UsesStore).
func CountRetirement(store *ObjectStore, claims []StorageBucket) (st *RetirementStatus, users int) {
	st = &RetirementStatus{Into: store.Spec.Retire.Into, Paused: store.Spec.Retire.Paused}
	for i := range claims {
		sb := &claims[i]
		state := RetirementStateOf(sb, store.Name)
		if state != RetirementMoved && state != RetirementNotCounted {
			users++
		}
		switch state {
		case RetirementMoved:
			st.Moved++
		case RetirementMoving:
			st.Moving++
		case RetirementQueued:
			st.Queued++
		case RetirementSkipped:
			st.Skipped++
			if len(st.SkippedClaims) < maxSkippedClaims {
				st.SkippedClaims = append(st.SkippedClaims, RetirementSkip{Claim: sb.Namespace + "/" + sb.Name, Reason: sb.Status.Retirement.Skipped})
			}
		case RetirementRemaining:
			st.Remaining++
		}
	}
	return st, users
}

// UsesStore says whether a claim holds the store: its bucket lives there, a move of it
// comes from or goes there, a cancelled move keeps its target there, or its spec names
// it, unless a retirement of the store took the bucket away (status.retirement): such
// a claim keeps its bucket where it went once the store is gone.
func (sb *StorageBucket) UsesStore(store string) bool {
	m := sb.Status.Move
	switch {
	case sb.HomeStore() == store:
		return true
	case !m.Terminal() && (m.From == store || m.To == store):
		return true
	case m.KeptTarget() && m.TargetKeptOn == store:
		return true
	case sb.Spec.ObjectStoreRef.Name == store:
		rec := sb.Status.Retirement
		return rec == nil || rec.From != store
	}
	return false
}
