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

// A retiring store's part of status: the counts the store keeps (status.retirement),
// its Retired condition, and from the claims themselves what the counts do not say:
// why each skipped one was skipped (its StoreRetired condition), and the bytes, rate
// and time left of the moves that run (status.move). Nothing is estimated that no
// field holds: a queued move has no size yet, so no time left is given for it.

// retirementReport is what status shows of a store's retirement.
type retirementReport struct {
	Into     string                 `json:"into"`
	Paused   bool                   `json:"paused,omitempty"`
	Versions bkv1.MoveVersions      `json:"versions,omitempty"`
	Retired  *metav1.Condition      `json:"retired,omitempty"`
	Counts   *bkv1.RetirementStatus `json:"counts,omitempty"`
	// Moving are the retirement's moves past Queued, as their claims report them.
	Moving []retirementMove `json:"moving,omitempty"`
	// Skipped are the claims that cannot follow, with the whole message of their
	// StoreRetired condition.
	Skipped []retirementSkip `json:"skipped,omitempty"`
	// MovedBytes adds up what the finished moves copied; MovedClaims counts them.
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

// retirementOf reports the store's retirement from its spec and status and the claims
// (every namespace's, or one's when that is all the caller may list); nil when the
// store is not retiring and keeps no count of one.
func retirementOf(store *bkv1.ObjectStore, claims []bkv1.StorageBucket) *retirementReport {
	if store.Spec.Retire == nil && store.Status.Retirement == nil {
		return nil
	}
	r := &retirementReport{Counts: store.Status.Retirement, Retired: apimeta.FindStatusCondition(store.Status.Conditions, bkv1.ConditionRetired)}
	if spec := store.Spec.Retire; spec != nil {
		r.Into, r.Paused, r.Versions = spec.Into, spec.Paused, spec.Versions
	} else {
		r.Into = store.Status.Retirement.Into
	}
	for i := range claims {
		sb := &claims[i]
		rec := sb.Status.Retirement
		if rec == nil || rec.From != store.Name {
			continue
		}
		name := sb.Namespace + "/" + sb.Name
		m := sb.Status.Move
		switch {
		case rec.Skipped != "":
			s := retirementSkip{Claim: name, Reason: rec.Skipped}
			if c := apimeta.FindStatusCondition(sb.Status.Conditions, bkv1.ConditionStoreRetired); c != nil {
				s.Message = c.Message
			}
			r.Skipped = append(r.Skipped, s)
		case m != nil && m.From == store.Name && m.Phase == bkv1.MoveDone:
			r.MovedClaims++
			r.MovedBytes += m.CopiedBytes
		case m != nil && m.From == store.Name && !m.Terminal() && m.Phase != bkv1.MoveQueued:
			r.Moving = append(r.Moving, retirementMove{Claim: name, Phase: m.Phase, CopiedBytes: m.CopiedBytes, TotalBytes: m.TotalBytes,
				BytesPerSecond: m.BytesPerSecond, Remaining: m.Remaining})
		}
	}
	sort.Slice(r.Skipped, func(i, j int) bool { return r.Skipped[i].Claim < r.Skipped[j].Claim })
	sort.Slice(r.Moving, func(i, j int) bool { return r.Moving[i].Claim < r.Moving[j].Claim })
	return r
}

func printRetirement(w io.Writer, r *retirementReport) {
	var b strings.Builder
	state := "retiring"
	switch {
	case r.Retired != nil && r.Retired.Status == metav1.ConditionTrue:
		state = "retired: no bucket left on the store"
	case r.Paused:
		state = "retiring, paused"
	}
	// The Retired condition is printed with the store's others.
	fmt.Fprintf(&b, "\nRetirement into %s (%s, versions %s)\n", r.Into, state, orDefault(r.Versions, bkv1.MoveVersions("Current")))
	if c := r.Counts; c != nil {
		fmt.Fprintf(&b, "  buckets: %d moved, %d moving, %d queued, %d skipped, %d not started\n", c.Moved, c.Moving, c.Queued, c.Skipped, c.Remaining)
	} else {
		b.WriteString("  buckets: not counted yet\n")
	}
	if r.MovedClaims > 0 {
		fmt.Fprintf(&b, "  moved: %s in %d finished moves\n", bytesOf(r.MovedBytes), r.MovedClaims)
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
	} else if c := r.Counts; c != nil && len(c.SkippedClaims) > 0 {
		b.WriteString("  skipped (as the store names them):\n") // claims the caller may not read
		for _, s := range c.SkippedClaims {
			fmt.Fprintf(&b, "    %s: %s\n", s.Claim, s.Reason)
		}
	}
	_, _ = io.WriteString(w, b.String())
}
