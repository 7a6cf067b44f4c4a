package main

import (
	"context"
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/remedy"
)

// finding is why's answer for one object: the condition that holds it back (or says it
// is fine), the remedy of its reason, and the findings of the objects it waits for.
type finding struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Condition is the type of the condition that decides; "" when there is none.
	Condition string       `json:"condition,omitempty"`
	Status    string       `json:"status,omitempty"`
	Reason    string       `json:"reason,omitempty"`
	Message   string       `json:"message,omitempty"`
	Since     *metav1.Time `json:"since,omitempty"`
	State     remedy.State `json:"state"`
	Who       remedy.Actor `json:"who,omitempty"`
	Guardrail string       `json:"guardrail,omitempty"`
	Means     string       `json:"means"`
	Do        string       `json:"do"`
	// Note adds what the conditions alone do not say (a spec the operator has not
	// answered yet, a deletion in progress).
	Note string `json:"note,omitempty"`
	// Also holds the other conditions that are not fine.
	Also []finding `json:"also,omitempty"`
	// Because holds the findings of the objects this one waits for: its store, or the
	// buckets an access grants.
	Because []finding `json:"because,omitempty"`
}

func (f *finding) object() string {
	if f.Namespace == "" {
		return f.Kind + " " + f.Name
	}
	return f.Kind + " " + f.Namespace + "/" + f.Name
}

// holding lists, per kind, the conditions that can hold an object back, most telling
// first, with the status that is fine for each.
var holding = map[kind][]struct {
	typ  string
	fine metav1.ConditionStatus
}{
	kindStorageBucket: {{bkv1.ConditionStalled, metav1.ConditionFalse}, {bkv1.ConditionReady, metav1.ConditionTrue},
		{bkv1.ConditionProvisioned, metav1.ConditionTrue}, {bkv1.ConditionConfigured, metav1.ConditionTrue}, {bkv1.ConditionAvailable, metav1.ConditionTrue}},
	kindBucketAccess: {{bkv1.ConditionStalled, metav1.ConditionFalse}, {bkv1.ConditionReady, metav1.ConditionTrue}},
	kindObjectStore: {{bkv1.ConditionStalled, metav1.ConditionFalse}, {bkv1.ConditionReady, metav1.ConditionTrue},
		{bkv1.ConditionAccessProviderReady, metav1.ConditionTrue}, {bkv1.ConditionAdminAPIReady, metav1.ConditionTrue}},
}

// storeReasons are the reasons of a StorageBucket or BucketAccess that its
// ObjectStore's own conditions explain.
var storeReasons = map[string]bool{
	bkv1.ReasonObjectStoreNotReady: true, bkv1.ReasonStoreUnreachable: true, bkv1.ReasonCredentialsMissing: true,
	bkv1.ReasonCredentialsInvalid: true, bkv1.ReasonTLSError: true, bkv1.ReasonAccessProviderUnavailable: true,
	bkv1.ReasonThrottled: true, bkv1.ReasonAdminAPIUnavailable: true, bkv1.ReasonForbidden: true,
}

// explainConditions finds what holds an object of kind k back from its conditions.
func explainConditions(k kind, meta metav1.Object, conds []metav1.Condition, observed int64) finding {
	f := finding{Kind: string(k), Namespace: meta.GetNamespace(), Name: meta.GetName()}
	if len(conds) == 0 {
		f.State, f.Who = remedy.Waiting, remedy.Platform
		f.Means = "The operator has written no status for it: it has not seen it yet."
		f.Do = "Wait a moment; if it lasts, the platform team checks that the operator runs and that its --watch-label-selector and namespaces select this object."
		return f
	}
	var found []metav1.Condition
	seen := map[string]bool{}
	for _, h := range holding[k] {
		c := apimeta.FindStatusCondition(conds, h.typ)
		if c == nil || c.Status == h.fine {
			continue
		}
		r, _ := remedy.For(c.Reason)
		// Stalled and Ready carry the same reason; an Unknown availability while the
		// bucket is fine otherwise is still worth saying (the store may be down), but
		// not beside another finding when it only says the bucket was never probed.
		if seen[c.Reason] || (r.State == remedy.Fine && c.Status != metav1.ConditionUnknown) ||
			(len(found) > 0 && c.Reason == bkv1.ReasonNotProbed) {
			continue
		}
		seen[c.Reason] = true
		found = append(found, *c)
	}
	if len(found) == 0 {
		c := apimeta.FindStatusCondition(conds, bkv1.ConditionReady)
		if c == nil {
			c = &conds[0]
		}
		found = append(found, *c)
	}
	f.fill(found[0])
	for _, c := range found[1:] {
		also := finding{Kind: f.Kind, Namespace: f.Namespace, Name: f.Name}
		also.fill(c)
		f.Also = append(f.Also, also)
	}
	if meta.GetDeletionTimestamp() != nil {
		f.Note = "It is being deleted; the deletion waits for what this says."
	} else if observed != meta.GetGeneration() {
		f.Note = fmt.Sprintf("The operator has not answered the latest spec (generation %d) yet; this is its verdict on generation %d.", meta.GetGeneration(), observed)
	}
	return f
}

// fill sets the finding's condition and its reason's remedy.
func (f *finding) fill(c metav1.Condition) {
	f.Condition, f.Status, f.Reason, f.Message = c.Type, string(c.Status), c.Reason, c.Message
	since := c.LastTransitionTime
	f.Since = &since
	r, ok := remedy.For(c.Reason)
	if !ok {
		f.State = remedy.Waiting
		f.Means = fmt.Sprintf("This tool knows no reason %q (the operator may be newer than the plugin); the message says what happened.", c.Reason)
		f.Do = "Read the message; a plugin of the operator's version explains it."
		return
	}
	f.State, f.Who, f.Guardrail, f.Means, f.Do = r.State, r.Who, r.Guardrail, r.Means, r.Do
	if r.State == remedy.Fine && c.Status == metav1.ConditionUnknown {
		f.State = remedy.Waiting
	}
}

// explainer reads the objects a finding leads to.
type explainer struct {
	c client.Client
	// depth stops a chain of causes (bucket, store) from going round.
	depth int
}

// explain returns the finding for t, with the findings it waits for.
func (e *explainer) explain(ctx context.Context, t target) (finding, error) {
	obj := newObject(t.kind)
	if err := get(ctx, e.c, t, obj); err != nil {
		return finding{}, err
	}
	return e.explainObject(ctx, obj), nil
}

func (e *explainer) explainObject(ctx context.Context, obj client.Object) finding {
	var f finding
	switch o := obj.(type) {
	case *bkv1.StorageBucket:
		f = explainConditions(kindStorageBucket, o, o.Status.Conditions, o.Status.ObservedGeneration)
		if f.Guardrail != "" {
			f.Guardrail += " of ObjectStore " + o.HomeStore()
		}
		if f.State != remedy.Fine && (storeReasons[f.Reason] || anyReason(f.Also, storeReasons)) {
			e.addStore(ctx, &f, o.HomeStore())
		}
	case *bkv1.BucketAccess:
		f = explainConditions(kindBucketAccess, o, o.Status.Conditions, o.Status.ObservedGeneration)
		switch {
		case f.State == remedy.Fine:
		case f.Reason == bkv1.ReasonBucketNotReady || f.Reason == bkv1.ReasonBucketRefused:
			for _, g := range o.Spec.Buckets {
				if cause, ok := e.cause(ctx, target{kind: kindStorageBucket, namespace: o.Namespace, name: g.Name}); ok {
					f.Because = append(f.Because, cause)
				}
			}
		case storeReasons[f.Reason] || f.Reason == bkv1.ReasonAccessProviderNotIAM:
			e.addStore(ctx, &f, o.Status.ObjectStore)
		}
	case *bkv1.ObjectStore:
		f = explainConditions(kindObjectStore, o, o.Status.Conditions, o.Status.ObservedGeneration)
	}
	return f
}

// addStore adds the store's finding to f's causes when the store is not fine.
func (e *explainer) addStore(ctx context.Context, f *finding, store string) {
	if store == "" {
		return
	}
	if cause, ok := e.cause(ctx, target{kind: kindObjectStore, name: store}); ok {
		f.Because = append(f.Because, cause)
	}
}

// cause explains t as the cause of another finding: only when it is readable and not
// fine (a tenant may not read ObjectStores; then the tenant's own condition is all).
func (e *explainer) cause(ctx context.Context, t target) (finding, bool) {
	if e.depth >= 2 {
		return finding{}, false
	}
	e.depth++
	defer func() { e.depth-- }()
	obj := newObject(t.kind)
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: t.namespace, Name: t.name}, obj); err != nil {
		return finding{}, false
	}
	f := e.explainObject(ctx, obj)
	return f, f.State != remedy.Fine
}

func anyReason(fs []finding, reasons map[string]bool) bool {
	for _, f := range fs {
		if reasons[f.Reason] {
			return true
		}
	}
	return false
}
