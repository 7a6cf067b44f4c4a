package storagebucket

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// A store retires into another (ObjectStore spec.retire): every bucket on it moves to
// the successor through the moves of move.go, queued and bounded as a move of
// spec.move is, and held to the successor's guardrails in full. The claim's spec is the
// tenant's and is never rewritten: destinationOf is the one place that says where a
// claim's bucket should live, and it says the successor where the store the spec names
// retires. So a GitOps tool applying the tenant's manifest again changes nothing, and a
// tenant naming the successor later (admission lets objectStoreRef change to
// status.objectStore) moves nothing either.
//
// A retirement's move is the platform team's, not the spec's: it reports itself in the
// claim's StoreRetired condition and status.retirement, never in Reconciling or
// Stalled, which kstatus (and every GitOps health check) reads. A bucket the successor
// refuses, or whose move fails, stays where it is, Ready as before: skipped, out of the
// move line (so it takes no slot), and tried again on the next sync or store change.

// maxRetireHops bounds how far destinationOf follows successors that retire too.
const maxRetireHops = 8

// destination is where a claim's bucket should live, and why.
type destination struct {
	// store is the ObjectStore the bucket should live on.
	store string
	// retirement is set when a retirement decides store rather than the spec; its
	// Skipped is filled in by the pass (reportRetirement).
	retirement *bkv1.ClaimRetirement
	// allVersions: a retirement on the way asks for every version (retire.versions).
	allVersions bool
	// undeclared is the retirement's choice for the settings the spec does not
	// declare (spec.retire.undeclaredSettings: the first retiring store's that makes one).
	undeclared bkv1.UndeclaredSettings
	// bucketName is the retirement's choice for a name the successor refuses
	// (spec.retire.bucketName: the first retiring store's that makes one).
	bucketName bkv1.MoveBucketName
	// refusal says why a retirement cannot apply (successors that retire into one
	// another): the bucket stays where it lives.
	refusal string
}

// paused says whether a retirement holds the bucket's move back.
func (d destination) paused() bool { return d.retirement != nil && d.retirement.Paused }

// destinationOf is where the claim's bucket should live: the store its spec names,
// unless that store retires, then its successor (and the successor's, where that
// retires too). A bucket a retirement took away from the store its spec still names
// stays where it went when that store retires no more, or is deleted: the claim's
// status.retirement remembers it, and only the tenant's own spec (a move, or naming
// where the bucket lives) takes it elsewhere.
func (r *Reconciler) destinationOf(ctx context.Context, sb *bkv1.StorageBucket) (destination, error) {
	named, home := sb.Spec.ObjectStoreRef.Name, sb.HomeStore()
	d := destination{store: named}
	start := named
	retire, err := r.retireOf(ctx, named)
	if err != nil {
		return d, err
	}
	if retire == nil {
		if rec := sb.Status.Retirement; rec == nil || rec.From != named || home == named {
			return d, nil // the spec decides
		}
		start = home
	}
	d.store, d.retirement = start, &bkv1.ClaimRetirement{From: named}
	seen := []string{start}
	for cur := start; ; {
		retire, err := r.retireOf(ctx, cur)
		if err != nil {
			return d, err
		}
		if retire == nil {
			break
		}
		if len(seen) > maxRetireHops || slices.Contains(seen, retire.Into) {
			d.store, d.refusal = home, fmt.Sprintf("ObjectStores %s retire into one another (spec.retire.into)", strings.Join(append(seen, retire.Into), " → "))
			break
		}
		d.retirement.Paused = d.retirement.Paused || retire.Paused
		d.allVersions = d.allVersions || retire.Versions == bkv1.MoveVersionsAll
		if d.undeclared == "" {
			d.undeclared = retire.UndeclaredSettings
		}
		if d.bucketName == "" {
			d.bucketName = retire.BucketName
		}
		cur, d.store = retire.Into, retire.Into
		seen = append(seen, cur)
	}
	d.retirement.Into = d.store
	return d, nil
}

// retireOf is the named store's spec.retire, nil when it does not retire or does not
// exist (a store deleted once its buckets left).
func (r *Reconciler) retireOf(ctx context.Context, name string) (*bkv1.RetireSpec, error) {
	store := &bkv1.ObjectStore{}
	if err := r.Get(ctx, types.NamespacedName{Name: name}, store); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return store.Spec.Retire, nil
}

// refuseNewBucketOn refuses to create a claim's first bucket on a retiring store: its
// buckets are to leave it. A bucket the claim has there already (its own, a released
// one it binds again, an adopted one) is reconciled, then moves with the others; one
// that vanished from the store is created again, and moves too.
func refuseNewBucketOn(store *bkv1.ObjectStore) error {
	if store.Spec.Retire == nil {
		return nil
	}
	return reconcile.Terminalf(bkv1.ReasonObjectStoreRetiring, "ObjectStore %q retires into %q and creates no new bucket: name %q in spec.objectStoreRef",
		store.Name, store.Spec.Retire.Into, store.Spec.Retire.Into)
}

// heldBack says whether a claim's unstarted move waits outside the move line: its
// retirement is paused, or skips it. Such a move takes no place that would keep other
// moves waiting.
func heldBack(sb *bkv1.StorageBucket) bool {
	rec := sb.Status.Retirement
	return rec != nil && (rec.Paused || rec.Skipped != "")
}

// reportRetirement records, after a pass that reconciled the bucket where it lives,
// what the retirement of the store its spec names does with it (StoreRetired and
// status.retirement), or removes both where no retirement applies. It never touches
// Ready, Reconciling or Stalled.
func reportRetirement(scope *bucketScope, step moveStep) {
	sb, d := scope.sb, scope.dest
	conds, gen := &sb.Status.Conditions, sb.Generation
	if d.retirement == nil {
		sb.Status.Retirement = nil
		reconcile.RemoveCondition(conds, bkv1.ConditionStoreRetired)
		return
	}
	rec, home, m := d.retirement, sb.HomeStore(), sb.Status.Move
	var reason, msg string
	switch {
	case d.refusal != "":
		rec.Skipped = bkv1.ReasonMoveNotAllowed
		reason, msg = bkv1.ReasonRetirementSkipped, fmt.Sprintf("ObjectStore %s retires, but %s: the bucket stays on %s", rec.From, d.refusal, home)
	case step.err != nil:
		rec.Skipped = step.err.Reason
		reason, msg = bkv1.ReasonRetirementSkipped, fmt.Sprintf("ObjectStore %s retires into %s, and this bucket cannot follow (%s): %s; it stays on %s, served as before, and is tried again",
			rec.From, rec.Into, step.err.Reason, step.err.Message, home)
	case home == d.store:
		reason, msg = bkv1.ReasonRetired, fmt.Sprintf("ObjectStore %s retired into %s, where the bucket lives now (status.objectStore); at leisure, set spec.objectStoreRef.name to %s (no spec.move needed): nothing moves",
			rec.From, home, home)
	case m != nil && m.Phase == bkv1.MoveQueued && rec.Paused:
		reason, msg = bkv1.ReasonRetirementPaused, fmt.Sprintf("ObjectStore %s retires into %s, and the retirement is paused (spec.retire.paused): the bucket's move waits; it is served from %s", rec.From, rec.Into, home)
	default:
		phase := "starting"
		if m != nil {
			phase = fmt.Sprintf("%s: %s", m.Phase, m.Message)
		}
		reason, msg = bkv1.ReasonRetiring, fmt.Sprintf("ObjectStore %s retires into %s: the bucket moves there (%s); spec.objectStoreRef needs no change", rec.From, rec.Into, phase)
	}
	sb.Status.Retirement = rec
	reconcile.SetCondition(conds, gen, bkv1.ConditionStoreRetired, metav1.ConditionTrue, reason, msg)
}
