package storagebucket

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/quota"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

func TestDesiredQuota(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	rails := &bkv1.StoreQuota{Default: &bkv1.BucketQuota{MaxObjects: n(5)}, Max: &bkv1.BucketQuota{MaxSize: q("1Mi"), MaxObjects: n(10)}}
	for _, tc := range []struct {
		name    string
		spec    *bkv1.BucketQuota
		store   *bkv1.StoreQuota
		want    quota.Limits
		named   bool
		refused bool
	}{
		{name: "nothing anywhere"},
		{name: "spec only", spec: &bkv1.BucketQuota{MaxSize: q("1.5Ki")}, want: quota.Limits{MaxBytes: 1536}, named: true},
		{name: "fraction of a byte rounds up", spec: &bkv1.BucketQuota{MaxSize: q("1500m")}, want: quota.Limits{MaxBytes: 2}, named: true},
		{name: "store default, capped", store: rails, want: quota.Limits{MaxBytes: 1 << 20, MaxObjects: 5}, named: true},
		{name: "spec within the max", spec: &bkv1.BucketQuota{MaxObjects: n(10)}, store: rails, want: quota.Limits{MaxBytes: 1 << 20, MaxObjects: 10}, named: true},
		{name: "spec above the max", spec: &bkv1.BucketQuota{MaxObjects: n(11)}, store: rails, named: true, refused: true},
		{name: "size above the max", spec: &bkv1.BucketQuota{MaxSize: q("2Mi")}, store: rails, named: true, refused: true},
		{name: "zero size", spec: &bkv1.BucketQuota{MaxSize: q("0")}, named: true, refused: true},
		{name: "negative size", spec: &bkv1.BucketQuota{MaxSize: q("-1")}, named: true, refused: true},
		{name: "a size past int64 (it would wrap to a negative, no limit)", spec: &bkv1.BucketQuota{MaxSize: q("1e30")}, store: rails, named: true, refused: true},
		{name: "a size past int64 without a store max", spec: &bkv1.BucketQuota{MaxSize: q("9Ei")}, named: true, refused: true},
		{name: "1Ei is allowed", spec: &bkv1.BucketQuota{MaxSize: q("1Ei")}, want: quota.Limits{MaxBytes: 1 << 60}, named: true},
		{name: "an admin's size past int64 counts as 1Ei", store: &bkv1.StoreQuota{Max: &bkv1.BucketQuota{MaxSize: q("1e30")}}, want: quota.Limits{MaxBytes: 1 << 60}, named: true},
		{name: "empty spec quota gets the max", spec: &bkv1.BucketQuota{}, store: rails, want: quota.Limits{MaxBytes: 1 << 20, MaxObjects: 10}, named: true},
		{name: "default above the max is cut", store: &bkv1.StoreQuota{Default: &bkv1.BucketQuota{MaxObjects: n(50)}, Max: &bkv1.BucketQuota{MaxObjects: n(10)}},
			want: quota.Limits{MaxObjects: 10}, named: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := &bkv1.StorageBucket{Spec: bkv1.StorageBucketSpec{Quota: tc.spec}}
			store := &bkv1.ObjectStore{Spec: bkv1.ObjectStoreSpec{Guardrails: bkv1.StoreGuardrails{Quota: tc.store}}}
			got, named, refusal := desiredQuota(sb, store)
			if (refusal != nil) != tc.refused || named != tc.named || got != tc.want {
				t.Fatalf("desiredQuota = %v, named %v, refusal %v; want %v, named %v, refused %v", got, named, refusal, tc.want, tc.named, tc.refused)
			}
			if refusal != nil && refusal.Reason != bkv1.ReasonQuotaNotAllowed {
				t.Errorf("refusal reason %s", refusal.Reason)
			}
		})
	}
}

func TestQuotaSettings(t *testing.T) {
	exclusive := managedConfig{exclusive: true}
	adopted := managedConfig{}
	adoptedSet := managedConfig{applied: bkv1.AppliedConfiguration{Quota: true}}
	noAPI := quotaPlan{err: errNoAdminAPI()}
	for _, tc := range []struct {
		name    string
		plan    quotaPlan
		managed managedConfig
		want    bool // a quota setting is part of the pass
	}{
		{"named", quotaPlan{named: true}, adopted, true},
		{"named without an admin API (reported)", quotaPlan{named: true, err: errNoAdminAPI()}, adopted, true},
		{"exclusive, nothing named: removes what it finds", quotaPlan{}, exclusive, true},
		{"adopted, never set: left alone", quotaPlan{}, adopted, false},
		{"adopted, set then dropped: removed", quotaPlan{}, adoptedSet, true},
		{"nothing named, no admin API", noAPI, exclusive, false},
	} {
		if got := len(quotaSettings(tc.plan, tc.managed)) == 1; got != tc.want {
			t.Errorf("%s: setting %v, want %v", tc.name, got, tc.want)
		}
	}
}

func errNoAdminAPI() error { return &s3.Error{Op: "SetBucketQuota", Kind: s3.KindNotImplemented} }
