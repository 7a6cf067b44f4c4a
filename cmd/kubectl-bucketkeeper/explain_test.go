package main

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/remedy"
)

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason + " message"}
}

func TestExplainConditions(t *testing.T) {
	meta := &metav1.ObjectMeta{Namespace: "ns", Name: "b", Generation: 2}
	for _, c := range []struct {
		name     string
		conds    []metav1.Condition
		observed int64
		want     string // Condition=Status Reason state
		also     int
		note     bool
	}{
		{"refused", []metav1.Condition{cond("Ready", "False", bkv1.ReasonNamespaceNotAllowed), cond("Stalled", "True", bkv1.ReasonNamespaceNotAllowed),
			cond("Available", "Unknown", bkv1.ReasonNotProbed)}, 2, "Stalled=True NamespaceNotAllowed blocked", 0, false},
		{"outage keeps Ready", []metav1.Condition{cond("Ready", "True", bkv1.ReasonReady), cond("Available", "Unknown", bkv1.ReasonStoreUnreachable)},
			2, "Available=Unknown StoreUnreachable waiting", 0, false},
		{"fine", []metav1.Condition{cond("Ready", "True", bkv1.ReasonReady), cond("Available", "True", bkv1.ReasonProbeSucceeded)},
			2, "Ready=True Ready fine", 0, false},
		{"two problems", []metav1.Condition{cond("Ready", "False", bkv1.ReasonNotSupportedByStore), cond("Available", "False", bkv1.ReasonProbeFailed)},
			2, "Ready=False NotSupportedByStore blocked", 1, false},
		{"a spec not answered yet", []metav1.Condition{cond("Ready", "True", bkv1.ReasonReady)}, 1, "Ready=True Ready fine", 0, true},
		{"a newer operator's reason", []metav1.Condition{cond("Ready", "False", "SomethingNew")}, 2, "Ready=False SomethingNew waiting", 0, false},
		{"no status", nil, 0, "= ", 0, false},
	} {
		f := explainConditions(kindStorageBucket, meta, c.conds, c.observed)
		got := f.Condition + "=" + f.Status + " " + f.Reason + " " + string(f.State)
		if c.conds == nil {
			got = "= "
			if f.State != remedy.Waiting || f.Do == "" {
				t.Errorf("%s: %+v", c.name, f)
			}
		}
		if got != c.want || len(f.Also) != c.also || (f.Note != "") != c.note || f.Means == "" || f.Do == "" {
			t.Errorf("%s: got %s (also %d, note %q, means %q, do %q); want %s (also %d, note %v)", c.name, got, len(f.Also), f.Note, f.Means, f.Do, c.want, c.also, c.note)
		}
	}
}
