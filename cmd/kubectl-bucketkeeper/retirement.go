package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// A retiring store's part of status. Its counts must agree with every other figure of
// the same output, so they come from one snapshot:
//
//   - When the caller listed the claims of every namespace, every figure is counted
//     from those claims, in the same call, by bkv1.RetirementStateOf, the rule the
//     operator counts status.retirement by: the counts, the bytes of the finished
//     moves, the running moves and the skipped claims. The store's status.retirement
//     is not shown beside them: the operator writes it at most once per
//     defaults.RetirementCountGap and after the claims changed, so midway through a
//     retirement it lags them (it said "0 moved" while two moves had finished).
//     The store's Retired condition is still its own verdict (its deletion waits for
//     it), shown without its message, which repeats the store's older counts.
//   - When the caller may list one namespace only, its claims cannot be counted for
//     the whole store: the counts are the store's (status.retirement), said to be
//     its own, and nothing counted from the namespace's claims is shown beside them,
//     only the store's own list of skipped claims.
//
// Nothing is estimated that no field holds: a queued move has no size yet, so no time
// left is given for it.

// Where a retirement's counts come from (retirementReport.CountedFrom).
const (
	countedFromClaims = "claims"
	countedFromStore  = "store"
)

// retirementReport is what status shows of a store's retirement.
type retirementReport struct {
	Into     string            `json:"into"`
	Paused   bool              `json:"paused,omitempty"`
	Versions bkv1.MoveVersions `json:"versions,omitempty"`
	// Retired is the store's Retired condition, the operator's verdict at its last count.
	Retired *metav1.Condition `json:"retired,omitempty"`
	// CountedFrom says whose counts Counts are: "claims", counted from the claims of
	// every namespace listed in this call, or "store", the store's status.retirement
	// (the caller may not list every namespace). Nil Counts: the store has not counted.
	CountedFrom string                 `json:"countedFrom"`
	Counts      *bkv1.RetirementStatus `json:"counts,omitempty"`
	// Users are the claims that still hold the store, as the claims say (CountedFrom
	// claims only).
	Users int `json:"users,omitempty"`
	// Moving are the retirement's moves past Queued, as their claims report them.
	Moving []retirementMove `json:"moving,omitempty"`
	// Skipped are the claims that cannot follow, with the whole message of their
	// StoreRetired condition.
	Skipped []retirementSkip `json:"skipped,omitempty"`
	// MovedBytes adds up what the finished moves of the moved claims copied;
	// MovedClaims counts the moved claims whose status still holds that move (one that
	// moved on, its successor retiring too, holds its next move instead).
	MovedClaims int   `json:"movedClaims"`
	MovedBytes  int64 `json:"movedBytes"`
}

// retirementMove is one running move of the retirement.
type retirementMove struct {
	Claim          string           `json:"claim"`
	Phase          bkv1.MovePhase   `json:"phase"`
	CopiedBytes    int64            `json:"copiedBytes"`
	TotalBytes     int64            `json:"totalBytes"`
	BytesPerSecond int64            `json:"bytesPerSecond,omitempty"`
	Remaining      *metav1.Duration `json:"remaining,omitempty"`
}

type retirementSkip struct {
	Claim   string `json:"claim"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// retirementOf reports the store's retirement from its spec and status and, when
// everyNamespace says the claims are every namespace's, from the claims; nil when the
// store is not retiring and keeps no count of one.
func retirementOf(store *bkv1.ObjectStore, claims []bkv1.StorageBucket, everyNamespace bool) *retirementReport {
	if store.Spec.Retire == nil && store.Status.Retirement == nil {
		return nil
	}
	r := &retirementReport{Retired: apimeta.FindStatusCondition(store.Status.Conditions, bkv1.ConditionRetired)}
	spec := store.Spec.Retire
	if spec != nil {
		r.Into, r.Paused, r.Versions = spec.Into, spec.Paused, spec.Versions
	} else {
		r.Into = store.Status.Retirement.Into
	}
	if !everyNamespace || spec == nil {
		// The caller sees part of the claims, or the retirement was called off and
		// only the store's last count is left.
		r.CountedFrom, r.Counts = countedFromStore, store.Status.Retirement
		return r
	}
	var onStore []bkv1.StorageBucket
	for i := range claims {
		if listedFor(&claims[i], store.Name) {
			onStore = append(onStore, claims[i])
		}
	}
	r.CountedFrom = countedFromClaims
	r.Counts, r.Users = bkv1.CountRetirement(store, onStore)
	for i := range onStore {
		sb := &onStore[i]
		name := sb.Namespace + "/" + sb.Name
		m := sb.Status.Move
		switch bkv1.RetirementStateOf(sb, store.Name) {
		case bkv1.RetirementSkipped:
			s := retirementSkip{Claim: name, Reason: sb.Status.Retirement.Skipped}
			if c := apimeta.FindStatusCondition(sb.Status.Conditions, bkv1.ConditionStoreRetired); c != nil {
				s.Message = c.Message
			}
			r.Skipped = append(r.Skipped, s)
		case bkv1.RetirementMoved:
			if m != nil && m.From == store.Name && m.Phase == bkv1.MoveDone {
				r.MovedClaims++
				r.MovedBytes += m.CopiedBytes
			}
		case bkv1.RetirementMoving:
			r.Moving = append(r.Moving, retirementMove{Claim: name, Phase: m.Phase, CopiedBytes: m.CopiedBytes, TotalBytes: m.TotalBytes,
				BytesPerSecond: m.BytesPerSecond, Remaining: m.Remaining})
		}
	}
	sort.Slice(r.Skipped, func(i, j int) bool { return r.Skipped[i].Claim < r.Skipped[j].Claim })
	sort.Slice(r.Moving, func(i, j int) bool { return r.Moving[i].Claim < r.Moving[j].Claim })
	return r
}

// listedFor says whether the operator's count of the store lists the claim: the
// fields its list selects by (reconcile.StoreFields) name the store.
func listedFor(sb *bkv1.StorageBucket, store string) bool {
	m, rec := sb.Status.Move, sb.Status.Retirement
	return sb.Spec.ObjectStoreRef.Name == store || sb.Status.ObjectStore == store ||
		(m != nil && m.TargetKeptOn == store) || (rec != nil && rec.Into == store)
}

// retirementState is the retirement's state in words.
func retirementState(r *retirementReport) string {
	retired := r.Retired != nil && r.Retired.Status == metav1.ConditionTrue
	switch {
	case r.CountedFrom == countedFromClaims && r.Users == 0 && !retired:
		return "no bucket left on the store, as its claims say; its Retired condition follows at the store's next count"
	case retired && (r.CountedFrom == countedFromStore || r.Users == 0):
		return "retired: no bucket left on the store"
	case r.Paused:
		return "retiring, paused"
	}
	return "retiring"
}

func printRetirement(w io.Writer, r *retirementReport) {
	var b strings.Builder
	// The Retired condition is printed with the store's others.
	fmt.Fprintf(&b, "\nRetirement into %s (%s, versions %s)\n", r.Into, retirementState(r), orDefault(r.Versions, bkv1.MoveVersions("Current")))
	c := r.Counts
	switch {
	case c == nil:
		b.WriteString("  buckets: not counted yet by the store\n")
	case r.CountedFrom == countedFromStore:
		fmt.Fprintf(&b, "  buckets, as the store last counted them (status.retirement): %d moved, %d moving, %d queued, %d skipped, %d not started\n",
			c.Moved, c.Moving, c.Queued, c.Skipped, c.Remaining)
	default:
		fmt.Fprintf(&b, "  buckets: %d moved, %d moving, %d queued, %d skipped, %d not started\n", c.Moved, c.Moving, c.Queued, c.Skipped, c.Remaining)
	}
	if r.MovedClaims > 0 {
		fmt.Fprintf(&b, "  moved: %s in %d finished moves", bytesOf(r.MovedBytes), r.MovedClaims)
		if c != nil && int(c.Moved) > r.MovedClaims {
			fmt.Fprintf(&b, " (%d more moved buckets moved on, their claims holding their next move)", int(c.Moved)-r.MovedClaims)
		}
		b.WriteString("\n")
	}
	if len(r.Moving) > 0 {
		var copied, total, rate int64
		var longest time.Duration
		estimated := 0
		for _, m := range r.Moving {
			copied, total, rate = copied+m.CopiedBytes, total+m.TotalBytes, rate+m.BytesPerSecond
			if m.Remaining != nil {
				estimated++
				longest = max(longest, m.Remaining.Duration)
			}
		}
		fmt.Fprintf(&b, "  moving: %s of %s copied", bytesOf(copied), bytesOf(total))
		if rate > 0 {
			fmt.Fprintf(&b, ", %s/s", bytesOf(rate))
		}
		if estimated > 0 {
			fmt.Fprintf(&b, ", %s left for the running moves (the longest of %d estimates)", longest.Round(time.Second), estimated)
		}
		b.WriteString("\n")
		for _, m := range r.Moving {
			fmt.Fprintf(&b, "    %s: %s, %s of %s", m.Claim, m.Phase, bytesOf(m.CopiedBytes), bytesOf(m.TotalBytes))
			if m.BytesPerSecond > 0 {
				fmt.Fprintf(&b, ", %s/s", bytesOf(m.BytesPerSecond))
			}
			if m.Remaining != nil {
				fmt.Fprintf(&b, ", %s left", m.Remaining.Duration.Round(time.Second))
			}
			b.WriteString("\n")
		}
	}
	if len(r.Skipped) > 0 {
		b.WriteString("  skipped:\n")
		for _, s := range r.Skipped {
			fmt.Fprintf(&b, "    %s: %s", s.Claim, s.Reason)
			if s.Message != "" {
				fmt.Fprintf(&b, ": %s", s.Message)
			}
			b.WriteString("\n")
		}
	} else if r.CountedFrom == countedFromStore && c != nil && len(c.SkippedClaims) > 0 {
		b.WriteString("  skipped (as the store names them):\n") // claims the caller may not read
		for _, s := range c.SkippedClaims {
			fmt.Fprintf(&b, "    %s: %s\n", s.Claim, s.Reason)
		}
	}
	_, _ = io.WriteString(w, b.String())
}
