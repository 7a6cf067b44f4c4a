package invariants

import (
	"fmt"
	"slices"
	"strings"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
)

// checkMovers holds MoverOwned over the movers' objects in namespace: every mover Job,
// every Secret holding a move's keys and every ConfigMap of a move (checkpoints, a
// pass's spec, its record) belongs to the current move of a live StorageBucket, one
// that has not ended. A Job being deleted is not judged: the cluster's garbage
// collector finishes its deletion, its pods first.
func checkMovers(snap *snapshot, namespace string) []Violation {
	var out []Violation
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range snap.moves {
			if !yield(id) {
				return
			}
		}
	}) {
		why, kept := moveGone(snap, id)
		if why == "" {
			continue
		}
		l := snap.moves[id]
		report := func(kind, name string) {
			out = append(out, Violation{Invariant: MoverOwned, Object: kind + " " + namespace + "/" + name, Found: "belongs to move " + id + ", " + why})
		}
		for _, job := range l.Jobs {
			if job.DeletionTimestamp.IsZero() {
				report("job", job.Name)
			}
		}
		for _, name := range l.Secrets {
			report("secret", name)
		}
		if kept {
			continue // a cancelled move keeps its checkpoints and record with its target
		}
		for _, name := range l.ConfigMaps {
			report("configmap", name)
		}
	}
	return out
}

// moveGone says why move id is no live claim's current move ("" when it is one); kept
// says it is a cancelled move its claim records keeping the target of
// (status.move.targetKeptOn), which keeps the move's ConfigMaps until then, to resume.
func moveGone(snap *snapshot, id string) (why string, kept bool) {
	hex, ok := mover.ClaimOfMove(id)
	if !ok {
		return "an ID the operator never gives a move", false
	}
	for i := range snap.buckets {
		sb := &snap.buckets[i]
		if strings.ReplaceAll(string(sb.UID), "-", "") != hex {
			continue
		}
		switch m := sb.Status.Move; {
		case m == nil:
			return fmt.Sprintf("and StorageBucket %s/%s has no move", sb.Namespace, sb.Name), false
		case m.ID != id:
			return fmt.Sprintf("and StorageBucket %s/%s's move is %s (%s)", sb.Namespace, sb.Name, m.ID, m.Phase), false
		case m.Terminal():
			return fmt.Sprintf("which StorageBucket %s/%s records as %s", sb.Namespace, sb.Name, m.Phase), m.TargetKeptOn != ""
		}
		return "", false
	}
	return "whose StorageBucket (uid " + hex + ") no longer exists", false
}

// copyAccounted says what is wrong with a bucket tagged for this cluster that a move
// froze (its policy holds the freeze) or tagged as moved ("" if nothing): it is
// released (its uid tag names no claim), or belongs to a live claim that records it as
// a copy a finished move left on this store (status.leftBehind) or as the source of its
// move under way. A gone claim's such bucket is a leak whatever its deletion policy:
// the claim's deletion, or the operator's sweep of moves, releases it.
func copyAccounted(snap *snapshot, store string, tags map[string]string, claimUID, policy string) string {
	frozen := strings.Contains(policy, bkv1.MoveFreezeSid)
	movedTo := tags[bkv1.TagMovedTo]
	if (!frozen && movedTo == "") || claimUID == "" {
		return ""
	}
	what := "tagged " + bkv1.TagMovedTo + "=" + movedTo
	if frozen {
		what = "frozen by a move (policy statement " + bkv1.MoveFreezeSid + ")"
		if movedTo != "" {
			what += " and tagged " + bkv1.TagMovedTo + "=" + movedTo
		}
	}
	for i := range snap.buckets {
		sb := &snap.buckets[i]
		if string(sb.UID) != claimUID {
			continue
		}
		if slices.Contains(sb.Status.LeftBehind, store) {
			return ""
		}
		if m := sb.Status.Move; m != nil && !m.Terminal() && m.From == store {
			return ""
		}
		return fmt.Sprintf("%s, but StorageBucket %s/%s records no copy left on this store and moves nothing out of it", what, sb.Namespace, sb.Name)
	}
	return fmt.Sprintf("%s, of claim %s (uid %s), which no longer exists, and not released (uid tag %q)", what, tags[bkv1.TagClaim], claimUID, tags[bkv1.TagUID])
}
