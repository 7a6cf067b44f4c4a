package storagebucket

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

func TestMoverParallelism(t *testing.T) {
	store := func(p *int32) *bkv1.ObjectStore {
		s := &bkv1.ObjectStore{}
		s.Spec.Guardrails.Moves.MaxParallelism = p
		return s
	}
	one, three := int32(1), int32(3)
	for _, tc := range []struct {
		from, to *bkv1.ObjectStore
		want     int
	}{
		{store(nil), store(nil), 0},
		{store(&three), store(nil), 3},
		{store(nil), store(&one), 1},
		{store(&three), store(&one), 1},
	} {
		if got := moverParallelism(tc.from, tc.to); got != tc.want {
			t.Errorf("moverParallelism = %d, want %d", got, tc.want)
		}
	}
}

func TestMoverCaps(t *testing.T) {
	store := func(name, cpu, mem string) *bkv1.ObjectStore {
		s := &bkv1.ObjectStore{}
		s.Name = name
		if cpu != "" {
			q := resource.MustParse(cpu)
			s.Spec.Guardrails.Moves.MaxMoverCPU = &q
		}
		if mem != "" {
			q := resource.MustParse(mem)
			s.Spec.Guardrails.Moves.MaxMoverMemory = &q
		}
		return s
	}
	caps, err := moverCaps(store("a", "2", "256Mi"), store("b", "500m", ""))
	cpu, mem := caps[corev1.ResourceCPU], caps[corev1.ResourceMemory]
	if err != nil || cpu.String() != "500m" || mem.String() != "256Mi" {
		t.Errorf("caps %v (%v), want cpu 500m and memory 256Mi", caps, err)
	}
	if caps, err := moverCaps(store("a", "", ""), store("b", "", "")); err != nil || len(caps) != 0 {
		t.Errorf("caps of stores without any: %v (%v)", caps, err)
	}
	_, err = moverCaps(store("a", "", ""), store("tiny", "", "32Mi"))
	if se := reconcile.AsStepError(err, ""); err == nil || se.Reason != bkv1.ReasonMoveNotAllowed || !strings.Contains(se.Message, `"tiny"`) {
		t.Errorf("a 32Mi cap: %v, want MoveNotAllowed naming the store", err)
	}
}
