package s3

import (
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestLockConfigOf reads the answers the stores give: Versity's empty Rule and a
// retention without a period (which it accepts) are no default retention.
func TestLockConfigOf(t *testing.T) {
	gov := types.ObjectLockRetentionModeGovernance
	cases := []struct {
		name string
		in   *types.ObjectLockConfiguration
		want ObjectLockConfig
	}{
		{"nothing", nil, ObjectLockConfig{}},
		{"enabled", &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled}, ObjectLockConfig{Enabled: true}},
		{"Versity's empty rule", &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled, Rule: &types.ObjectLockRule{}}, ObjectLockConfig{Enabled: true}},
		{"a retention without a period", &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled,
			Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: gov}}}, ObjectLockConfig{Enabled: true}},
		{"days", &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled,
			Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: gov, Days: aws.Int32(3)}}},
			ObjectLockConfig{Enabled: true, DefaultRetention: &DefaultRetention{Mode: RetentionGovernance, Days: 3}}},
		{"years", &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled,
			Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeCompliance, Years: aws.Int32(2)}}},
			ObjectLockConfig{Enabled: true, DefaultRetention: &DefaultRetention{Mode: RetentionCompliance, Years: 2}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := lockConfigOf(tc.in)
			if got.Enabled != tc.want.Enabled || (got.DefaultRetention == nil) != (tc.want.DefaultRetention == nil) ||
				(got.DefaultRetention != nil && *got.DefaultRetention != *tc.want.DefaultRetention) {
				t.Errorf("lockConfigOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestPutObjectLockConfigurationRefusesBeforeSending: turning object lock off, or a
// default retention with no or two periods, is refused without a request.
func TestPutObjectLockConfigurationRefusesBeforeSending(t *testing.T) {
	c, obs := fakeServer(t, func(w http.ResponseWriter, r *http.Request) { t.Errorf("request sent: %s %s", r.Method, r.URL) })
	ctx := testCtx(t)
	for name, cfg := range map[string]ObjectLockConfig{
		"off":            {},
		"no period":      {Enabled: true, DefaultRetention: &DefaultRetention{Mode: RetentionGovernance}},
		"two periods":    {Enabled: true, DefaultRetention: &DefaultRetention{Mode: RetentionGovernance, Days: 1, Years: 1}},
		"unknown mode":   {Enabled: true, DefaultRetention: &DefaultRetention{Mode: "LEGAL", Days: 1}},
		"negative years": {Enabled: true, DefaultRetention: &DefaultRetention{Mode: RetentionCompliance, Years: -1}},
	} {
		if err := c.PutObjectLockConfiguration(ctx, "b", cfg); KindOf(err) != KindInvalid {
			t.Errorf("%s: %v, want Invalid", name, err)
		}
	}
	if n := len(obs.all()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestObjectErrorMayBeLock: the per-key refusals a purge reads a version's lock for are
// AccessDenied (AWS, SeaweedFS, Versity, Ceph RGW) and MinIO's InvalidRequest "Object is
// WORM protected"; no other InvalidRequest, and no other refusal.
func TestObjectErrorMayBeLock(t *testing.T) {
	for _, tc := range []struct {
		e    ObjectError
		want bool
	}{
		{ObjectError{Code: "AccessDenied", Message: "Access Denied"}, true},
		{ObjectError{Code: "InvalidRequest", Message: "Object is WORM protected and cannot be overwritten"}, true},
		{ObjectError{Code: "InvalidRequest", Message: "Invalid version id specified"}, false},
		{ObjectError{Code: "InvalidRequest"}, false},
		{ObjectError{Code: "InternalError", Message: "Object is WORM protected"}, false},
		{ObjectError{Code: "NoSuchVersion"}, false},
	} {
		if got := tc.e.MayBeLock(); got != tc.want {
			t.Errorf("%s %q: MayBeLock %v, want %v", tc.e.Code, tc.e.Message, got, tc.want)
		}
	}
}
