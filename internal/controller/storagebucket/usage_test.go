package storagebucket

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/quota"
)

func TestUsageWorthWriting(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(bytes, objects int64, ago time.Duration) *bkv1.BucketUsage {
		return &bkv1.BucketUsage{Bytes: bytes, Objects: objects, MeasuredAt: metav1.NewTime(now.Add(-ago)), Figure: bkv1.UsageLogical}
	}
	for _, tc := range []struct {
		name string
		have *bkv1.BucketUsage
		u    quota.Usage
		want bool
	}{
		{"first reading", nil, quota.Usage{}, true},
		{"unchanged", at(1000, 10, time.Minute), quota.Usage{Bytes: 1000, Objects: 10}, false},
		{"below 1% of the bytes", at(100000, 10, time.Minute), quota.Usage{Bytes: 100999, Objects: 10}, false},
		{"1% of the bytes", at(100000, 10, time.Minute), quota.Usage{Bytes: 101000, Objects: 10}, true},
		{"1% fewer bytes", at(100000, 10, time.Minute), quota.Usage{Bytes: 99000, Objects: 10}, true},
		{"an object more of few", at(1000, 10, time.Minute), quota.Usage{Bytes: 1000, Objects: 11}, true},
		{"from zero", at(0, 0, time.Minute), quota.Usage{Bytes: 1, Objects: 1}, true},
		{"to zero", at(5, 1, time.Minute), quota.Usage{}, true},
		{"an hour old, unchanged", at(1000, 10, time.Hour), quota.Usage{Bytes: 1000, Objects: 10}, true},
		{"huge figures do not overflow", at(1<<62, 1<<62, time.Minute), quota.Usage{Bytes: 1<<62 + 1, Objects: 1 << 62}, false},
	} {
		if got := usageWorthWriting(tc.have, tc.u, now); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
