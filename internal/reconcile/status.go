package reconcile

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StatusPatcher writes an object's status once, at the end of a reconcile, and only when
// it changed: a reconcile that found everything in order costs no API write. It is made
// for one object and knows that object's kind (NewStatusPatcher), so no caller has to
// say again which status to compare.
type StatusPatcher struct {
	client client.Client
	// obj is the object the reconcile works on; before is its copy as last written.
	obj, before client.Object
	// status returns the status part of an object of obj's kind.
	status func(client.Object) any
	// onWrite counts writes (metrics); may be nil.
	onWrite func()
	// onCommit runs after a successful status write: Events that announce a status
	// transition go here, so a reconcile that worked from a stale copy (and whose
	// write then conflicts) cannot announce the same transition twice.
	onCommit []func()
}

// NewStatusPatcher takes the copy of obj that later writes compare against. status
// returns the status of an object of obj's kind; onWrite may be nil.
func NewStatusPatcher[T client.Object](c client.Client, obj T, status func(T) any, onWrite func()) *StatusPatcher {
	return &StatusPatcher{
		client:  c,
		obj:     obj,
		before:  obj.DeepCopyObject().(client.Object),
		status:  func(o client.Object) any { return status(o.(T)) },
		onWrite: onWrite,
	}
}

// afterWrite queues f to run once the status write succeeds; it is dropped when the
// write is skipped (no transition) or fails (the retry decides again).
func (p *StatusPatcher) AfterWrite(f func()) { p.onCommit = append(p.onCommit, f) }

// patch sends a merge patch of the object's status against the copy taken at the start.
// Only the status parts are compared, so metadata or spec differences (a finalizer just
// added) never cause a status write. An object that is gone needs no status.
func (p *StatusPatcher) patch(ctx context.Context) error {
	return client.IgnoreNotFound(p.write(ctx))
}

func (p *StatusPatcher) write(ctx context.Context) error {
	if equality.Semantic.DeepEqual(p.status(p.before), p.status(p.obj)) {
		return nil
	}
	// The optimistic lock makes a reconcile that worked from a stale cached copy fail
	// with a conflict (and retry) instead of overwriting newer conditions.
	// Metadata patches earlier in this reconcile (PatchMetadata) moved the resource
	// version on; the status they saw is still the one this reconcile started from.
	base := p.before.DeepCopyObject().(client.Object)
	base.SetResourceVersion(p.obj.GetResourceVersion())
	if err := p.client.Status().Patch(ctx, p.obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	if p.onWrite != nil {
		p.onWrite()
	}
	for _, f := range p.onCommit {
		f()
	}
	return nil
}

// WriteNow writes the status built so far at once, for a record that must be on the
// server before the next step acts (the intent to create a bucket). The deferred patch
// then compares against what was written here, and the Events queued so far, whose
// transitions this write carries, are announced now. An object that is gone is an
// error here: the record was not made, so the step it guards must not act.
func (p *StatusPatcher) WriteNow(ctx context.Context) error {
	if err := p.write(ctx); err != nil {
		return err
	}
	p.before = p.obj.DeepCopyObject().(client.Object)
	p.onCommit = nil
	return nil
}

// SetCondition sets a condition with the object's generation. SetStatusCondition keeps
// LastTransitionTime when the status does not change, so re-setting the same verdict
// leaves the status byte-for-byte equal and the patch above is skipped.
func SetCondition(conds *[]metav1.Condition, generation int64, typ string, status metav1.ConditionStatus, reason, message string) {
	apimeta.SetStatusCondition(conds, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            truncateMessage(message),
		ObservedGeneration: generation,
	})
}

// truncateMessage keeps condition messages within the API's 32 KiB limit.
func truncateMessage(m string) string {
	const limit = 32 * 1024
	if len(m) > limit {
		return m[:limit-3] + "..."
	}
	return m
}

// PatchMetadata changes an object's metadata (finalizers, annotations) with a merge
// patch sent from a copy, and takes back only the new metadata: the status a reconcile
// is building in obj must not be replaced by the server's older one.
func PatchMetadata[T client.Object](ctx context.Context, c client.Client, obj T, mutate func(T)) error {
	work := obj.DeepCopyObject().(T)
	base := work.DeepCopyObject().(T)
	mutate(work)
	// A merge patch replaces lists whole: one that changes the finalizers from a stale
	// copy would drop a finalizer another controller added since. Such a patch carries
	// the optimistic lock, so it conflicts and is retried from a fresh copy. Annotations
	// are a map, which a merge patch merges key by key: no lock needed there.
	var opts []client.MergeFromOption
	if !slices.Equal(base.GetFinalizers(), work.GetFinalizers()) {
		opts = append(opts, client.MergeFromWithOptimisticLock{})
	}
	patch := client.MergeFromWithOptions(base, opts...)
	if err := c.Patch(ctx, work, patch); err != nil {
		return err
	}
	mutate(obj)
	obj.SetResourceVersion(work.GetResourceVersion())
	obj.SetGeneration(work.GetGeneration())
	return nil
}
