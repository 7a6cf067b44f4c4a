package storagebucket

import (
	"testing"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
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
