package storagebucket

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

func retention(mode bkv1.ObjectLockMode, days int32) *bkv1.ObjectLockRetention {
	return &bkv1.ObjectLockRetention{Mode: mode, Days: ptr.To(days)}
}

// TestCheckObjectLock: a mode the store's guardrails do not list, or a retention longer
// than their longest, is refused, naming the guardrail; Governance alone is allowed by
// default, and a year counts 365 days.
func TestCheckObjectLock(t *testing.T) {
	store := func(mut func(*bkv1.ObjectLockGuardrails)) *bkv1.ObjectStore {
		s := &bkv1.ObjectStore{}
		s.Name = "s"
		if mut != nil {
			mut(&s.Spec.Guardrails.ObjectLock)
		}
		return s
	}
	claim := func(l *bkv1.ObjectLock) *bkv1.StorageBucket {
		sb := &bkv1.StorageBucket{}
		sb.Spec.ObjectLock = l
		return sb
	}
	compliance := func(g *bkv1.ObjectLockGuardrails) {
		g.AllowedModes = []bkv1.ObjectLockMode{bkv1.ObjectLockGovernance, bkv1.ObjectLockCompliance}
	}
	cases := []struct {
		name    string
		lock    *bkv1.ObjectLock
		store   *bkv1.ObjectStore
		refused string
	}{
		{"no object lock", nil, store(nil), ""},
		{"no default retention", &bkv1.ObjectLock{}, store(nil), ""},
		{"Governance by default", &bkv1.ObjectLock{DefaultRetention: retention(bkv1.ObjectLockGovernance, 3650)}, store(nil), ""},
		{"Compliance by default", &bkv1.ObjectLock{DefaultRetention: retention(bkv1.ObjectLockCompliance, 1)}, store(nil), "only the admin can allow it"},
		{"Compliance allowed", &bkv1.ObjectLock{DefaultRetention: retention(bkv1.ObjectLockCompliance, 1)}, store(compliance), ""},
		{"Governance not allowed", &bkv1.ObjectLock{DefaultRetention: retention(bkv1.ObjectLockGovernance, 1)},
			store(func(g *bkv1.ObjectLockGuardrails) { g.AllowedModes = []bkv1.ObjectLockMode{bkv1.ObjectLockCompliance} }), "not among"},
		{"at the longest", &bkv1.ObjectLock{DefaultRetention: retention(bkv1.ObjectLockGovernance, 30)},
			store(func(g *bkv1.ObjectLockGuardrails) { g.MaxRetentionDays = ptr.To(int32(30)) }), ""},
		{"longer than the longest", &bkv1.ObjectLock{DefaultRetention: retention(bkv1.ObjectLockGovernance, 31)},
			store(func(g *bkv1.ObjectLockGuardrails) { g.MaxRetentionDays = ptr.To(int32(30)) }), "maxRetentionDays"},
		{"a year is 365 days", &bkv1.ObjectLock{DefaultRetention: &bkv1.ObjectLockRetention{Mode: bkv1.ObjectLockGovernance, Years: ptr.To(int32(1))}},
			store(func(g *bkv1.ObjectLockGuardrails) { g.MaxRetentionDays = ptr.To(int32(364)) }), "maxRetentionDays"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkObjectLock(claim(tc.lock), tc.store)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && (err == nil || err.Reason != bkv1.ReasonObjectLockNotAllowed || !strings.Contains(err.Message, tc.refused)):
				t.Fatalf("verdict %v, want ObjectLockNotAllowed saying %q", err, tc.refused)
			}
		})
	}
}

// TestSettingObjectLock: object lock is turned on where the store can, the default
// retention written only when it differs, one the operator set removed when the spec
// drops it and one it never set left alone; a store that cannot lock an existing bucket
// is reported as not supporting it, and status.objectLock says what the bucket has.
func TestSettingObjectLock(t *testing.T) {
	gov1 := &s3.DefaultRetention{Mode: s3.RetentionGovernance, Days: 1}
	comp2y := &s3.DefaultRetention{Mode: s3.RetentionCompliance, Years: 2}
	lockSpec := func(r *bkv1.ObjectLockRetention) *bkv1.StorageBucket {
		sb := &bkv1.StorageBucket{}
		sb.Spec.ObjectLock = &bkv1.ObjectLock{DefaultRetention: r}
		return sb
	}
	adopted := managedConfig{}
	ours := managedConfig{exclusive: true}
	type tc struct {
		name       string
		sb         *bkv1.StorageBucket
		managed    managedConfig
		fake       *fakeS3
		wantWrites []string
		wantLock   s3.ObjectLockConfig
		wantKind   s3.Kind
		wantStatus string
		noSetting  bool
	}
	cases := []tc{
		{name: "created locked, retention set", sb: lockSpec(retention(bkv1.ObjectLockGovernance, 1)), managed: ours,
			fake: &fakeS3{lock: s3.ObjectLockConfig{Enabled: true}}, wantWrites: []string{"PutObjectLockConfiguration"},
			wantLock: s3.ObjectLockConfig{Enabled: true, DefaultRetention: gov1}, wantStatus: "Governance, 1 day"},
		{name: "in line: no write", sb: lockSpec(retention(bkv1.ObjectLockGovernance, 1)), managed: ours,
			fake:     &fakeS3{lock: s3.ObjectLockConfig{Enabled: true, DefaultRetention: gov1}},
			wantLock: s3.ObjectLockConfig{Enabled: true, DefaultRetention: gov1}, wantStatus: "Governance, 1 day"},
		{name: "shortened by hand: put back", sb: lockSpec(&bkv1.ObjectLockRetention{Mode: bkv1.ObjectLockCompliance, Years: ptr.To(int32(2))}), managed: ours,
			fake:       &fakeS3{lock: s3.ObjectLockConfig{Enabled: true, DefaultRetention: &s3.DefaultRetention{Mode: s3.RetentionCompliance, Years: 1}}},
			wantWrites: []string{"PutObjectLockConfiguration"}, wantLock: s3.ObjectLockConfig{Enabled: true, DefaultRetention: comp2y}, wantStatus: "Compliance, 2 years"},
		{name: "removed by hand: put back", sb: lockSpec(retention(bkv1.ObjectLockGovernance, 1)), managed: adopted,
			fake: &fakeS3{lock: s3.ObjectLockConfig{Enabled: true}}, wantWrites: []string{"PutObjectLockConfiguration"},
			wantLock: s3.ObjectLockConfig{Enabled: true, DefaultRetention: gov1}, wantStatus: "Governance, 1 day"},
		{name: "dropped from the spec, the operator's: removed", sb: lockSpec(nil), managed: managedConfig{applied: bkv1.AppliedConfiguration{ObjectLockRetention: true}},
			fake: &fakeS3{lock: s3.ObjectLockConfig{Enabled: true, DefaultRetention: gov1}}, wantWrites: []string{"PutObjectLockConfiguration"},
			wantLock: s3.ObjectLockConfig{Enabled: true}, wantStatus: "none"},
		{name: "found on an adopted bucket, spec without one: kept", sb: lockSpec(nil), managed: adopted,
			fake:     &fakeS3{lock: s3.ObjectLockConfig{Enabled: true, DefaultRetention: comp2y}},
			wantLock: s3.ObjectLockConfig{Enabled: true, DefaultRetention: comp2y}, wantStatus: "Compliance, 2 years"},
		{name: "adopted locked bucket, spec without object lock: reported", sb: &bkv1.StorageBucket{}, managed: adopted,
			fake:     &fakeS3{lock: s3.ObjectLockConfig{Enabled: true, DefaultRetention: comp2y}},
			wantLock: s3.ObjectLockConfig{Enabled: true, DefaultRetention: comp2y}, wantStatus: "Compliance, 2 years"},
		{name: "adopted bucket without object lock, none asked", sb: &bkv1.StorageBucket{}, managed: adopted, fake: &fakeS3{}},
		{name: "a bucket of ours without object lock is not even read", sb: &bkv1.StorageBucket{}, managed: ours, fake: &fakeS3{}, noSetting: true},
		{name: "turned on for an existing versioned bucket", sb: lockSpec(retention(bkv1.ObjectLockGovernance, 1)), managed: adopted,
			fake: &fakeS3{versioning: s3.VersioningEnabled, lockOnExisting: true}, wantWrites: []string{"PutObjectLockConfiguration"},
			wantLock: s3.ObjectLockConfig{Enabled: true, DefaultRetention: gov1}, wantStatus: "Governance, 1 day"},
		{name: "a store that cannot lock an existing bucket", sb: lockSpec(nil), managed: adopted,
			fake: &fakeS3{versioning: s3.VersioningEnabled}, wantWrites: []string{"PutObjectLockConfiguration"}, wantKind: s3.KindNotImplemented},
		{name: "a store without object lock, none asked", sb: &bkv1.StorageBucket{}, managed: adopted,
			fake: &fakeS3{errs: map[string]error{"GetObjectLockConfiguration": notImplemented("GetObjectLockConfiguration")}}},
		{name: "a store without object lock, asked", sb: lockSpec(nil), managed: ours,
			fake: &fakeS3{errs: map[string]error{"GetObjectLockConfiguration": notImplemented("GetObjectLockConfiguration")}}, wantKind: s3.KindNotImplemented},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			settings := objectLockSettings(c.sb, c.managed)
			if c.noSetting {
				if len(settings) != 0 || len(c.fake.reads) != 0 {
					t.Fatalf("settings %d, reads %v; want none", len(settings), c.fake.reads)
				}
				return
			}
			if len(settings) != 1 {
				t.Fatalf("%d settings", len(settings))
			}
			_, err := settings[0].apply(t.Context(), c.fake, "b")
			if s3.KindOf(err) != c.wantKind || (c.wantKind == s3.KindUnknown && err != nil) {
				t.Fatalf("error %v, want kind %v", err, c.wantKind)
			}
			if !slices.Equal(c.fake.writes, c.wantWrites) {
				t.Errorf("writes %v, want %v", c.fake.writes, c.wantWrites)
			}
			if err == nil && (c.fake.lock.Enabled != c.wantLock.Enabled || !sameRetention(c.fake.lock.DefaultRetention, c.wantLock.DefaultRetention)) {
				t.Errorf("bucket's object lock %+v, want %+v", c.fake.lock, c.wantLock)
			}
			got := "unlocked"
			if l := c.sb.Status.ObjectLock; l != nil {
				got = l.DefaultRetention.String()
			}
			if want := c.wantStatus; err == nil && want == "" && got != "unlocked" || want != "" && got != want {
				t.Errorf("status.objectLock says %q, want %q", got, want)
			}
		})
	}
}
