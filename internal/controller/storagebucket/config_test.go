package storagebucket

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/guardrail"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

type applyFunc = func(context.Context, s3.Client, string) (bool, error)

// settingCase runs one apply func against one fake bucket.
type settingCase struct {
	name       string
	fake       *fakeS3
	apply      applyFunc
	wantWrote  bool
	wantWrites []string
	// wantErr is the injected error expected back (errors.Is), nil for success.
	wantErr error
	// check inspects the bucket afterwards.
	check func(t *testing.T, f *fakeS3)
}

func runSettingCases(t *testing.T, cases []settingCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wrote, err := tc.apply(context.Background(), tc.fake, "b")
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil && s3.KindOf(err) != s3.KindOf(tc.wantErr) {
				t.Errorf("KindOf(error) = %v, want %v", s3.KindOf(err), s3.KindOf(tc.wantErr))
			}
			if wrote != tc.wantWrote {
				t.Errorf("wrote = %v, want %v", wrote, tc.wantWrote)
			}
			if !slices.Equal(tc.fake.writes, tc.wantWrites) {
				t.Errorf("writes = %v, want %v", tc.fake.writes, tc.wantWrites)
			}
			if tc.check != nil {
				tc.check(t, tc.fake)
			}
		})
	}
}

func TestSettingVersioning(t *testing.T) {
	getNI := notImplemented("GetBucketVersioning")
	putDenied := s3Err("PutBucketVersioning", s3.KindAccessDenied)
	wantVersioning := func(v s3.VersioningStatus) func(*testing.T, *fakeS3) {
		return func(t *testing.T, f *fakeS3) {
			if f.versioning != v {
				t.Errorf("versioning = %q, want %q", f.versioning, v)
			}
		}
	}
	runSettingCases(t, []settingCase{
		{name: "enabled already", fake: &fakeS3{versioning: s3.VersioningEnabled},
			apply: versioningSetting(s3.VersioningEnabled), check: wantVersioning(s3.VersioningEnabled)},
		{name: "suspended already", fake: &fakeS3{versioning: s3.VersioningSuspended},
			apply: versioningSetting(s3.VersioningSuspended), check: wantVersioning(s3.VersioningSuspended)},
		{name: "never versioned, enable", fake: &fakeS3{},
			apply: versioningSetting(s3.VersioningEnabled), wantWrote: true, wantWrites: []string{"PutBucketVersioning"}, check: wantVersioning(s3.VersioningEnabled)},
		{name: "never versioned, suspend", fake: &fakeS3{},
			apply: versioningSetting(s3.VersioningSuspended), wantWrote: true, wantWrites: []string{"PutBucketVersioning"}, check: wantVersioning(s3.VersioningSuspended)},
		{name: "enabled, suspend", fake: &fakeS3{versioning: s3.VersioningEnabled},
			apply: versioningSetting(s3.VersioningSuspended), wantWrote: true, wantWrites: []string{"PutBucketVersioning"}, check: wantVersioning(s3.VersioningSuspended)},
		{name: "suspended, enable", fake: &fakeS3{versioning: s3.VersioningSuspended},
			apply: versioningSetting(s3.VersioningEnabled), wantWrote: true, wantWrites: []string{"PutBucketVersioning"}, check: wantVersioning(s3.VersioningEnabled)},
		{name: "store without versioning", fake: &fakeS3{errs: map[string]error{"GetBucketVersioning": getNI}},
			apply: versioningSetting(s3.VersioningEnabled), wantErr: getNI},
		{name: "write refused", fake: &fakeS3{errs: map[string]error{"PutBucketVersioning": putDenied}},
			apply: versioningSetting(s3.VersioningEnabled), wantWrote: true, wantWrites: []string{"PutBucketVersioning"}, wantErr: putDenied, check: wantVersioning(s3.VersioningOff)},
	})
}

func TestSettingTags(t *testing.T) {
	owner := map[string]string{bkv1.TagClaim: "ns/sb", bkv1.TagUID: "u1"}
	with := func(extra map[string]string) map[string]string {
		m := maps.Clone(owner)
		maps.Copy(m, extra)
		return m
	}
	wantTags := func(want map[string]string) func(*testing.T, *fakeS3) {
		return func(t *testing.T, f *fakeS3) {
			if !maps.Equal(f.tags, want) {
				t.Errorf("tags = %v, want %v", f.tags, want)
			}
		}
	}
	getDenied := s3Err("GetBucketTagging", s3.KindAccessDenied)
	getNI := notImplemented("GetBucketTagging")
	runSettingCases(t, []settingCase{
		{name: "equal", fake: &fakeS3{tags: with(map[string]string{"team": "a"})},
			apply: exclusiveTags(with(map[string]string{"team": "a"})), check: wantTags(with(map[string]string{"team": "a"}))},
		{name: "no tags yet", fake: &fakeS3{},
			apply: exclusiveTags(with(map[string]string{"team": "a"})), wantWrote: true, wantWrites: []string{"PutBucketTagging"}, check: wantTags(with(map[string]string{"team": "a"}))},
		{name: "value differs", fake: &fakeS3{tags: with(map[string]string{"team": "b"})},
			apply: exclusiveTags(with(map[string]string{"team": "a"})), wantWrote: true, wantWrites: []string{"PutBucketTagging"}, check: wantTags(with(map[string]string{"team": "a"}))},
		{name: "tag removed from spec is removed from bucket", fake: &fakeS3{tags: with(map[string]string{"team": "a", "old": "x"})},
			apply: exclusiveTags(with(map[string]string{"team": "a"})), wantWrote: true, wantWrites: []string{"PutBucketTagging"}, check: wantTags(with(map[string]string{"team": "a"}))},
		{name: "ownership tag lost out of band", fake: &fakeS3{tags: map[string]string{bkv1.TagClaim: "ns/sb", "team": "a"}},
			apply: exclusiveTags(with(map[string]string{"team": "a"})), wantWrote: true, wantWrites: []string{"PutBucketTagging"}, check: wantTags(with(map[string]string{"team": "a"}))},
		{name: "empty value differs from absent", fake: &fakeS3{tags: owner},
			apply: exclusiveTags(with(map[string]string{"flag": ""})), wantWrote: true, wantWrites: []string{"PutBucketTagging"}, check: wantTags(with(map[string]string{"flag": ""}))},
		{name: "read refused", fake: &fakeS3{errs: map[string]error{"GetBucketTagging": getDenied}},
			apply: exclusiveTags(owner), wantErr: getDenied},
		{name: "store without tagging", fake: &fakeS3{errs: map[string]error{"GetBucketTagging": getNI}},
			apply: exclusiveTags(owner), wantErr: getNI},
	})
}

func TestSettingLifecycle(t *testing.T) {
	ruleA := s3.LifecycleRule{ID: "a", Prefix: "logs/", ExpirationDays: ptr.To[int32](30)}
	ruleB := s3.LifecycleRule{ID: "b", AbortIncompleteMultipartUploadDays: ptr.To[int32](7)}
	ruleC := s3.LifecycleRule{ID: "c", Prefix: "tmp/", NoncurrentVersionExpirationDays: ptr.To[int32](3)}
	ruleALonger := ruleA
	ruleALonger.ExpirationDays = ptr.To[int32](60)
	ruleAOtherPrefix := ruleA
	ruleAOtherPrefix.Prefix = "audit/"

	wantRules := func(want ...s3.LifecycleRule) func(*testing.T, *fakeS3) {
		return func(t *testing.T, f *fakeS3) {
			if len(want) == 0 {
				want = nil
			}
			got := f.lifecycle
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("lifecycle = %+v, want %+v", got, want)
			}
		}
	}
	getNI := notImplemented("GetBucketLifecycleConfiguration")
	getDenied := s3Err("GetBucketLifecycleConfiguration", s3.KindAccessDenied)
	putInvalid := s3Err("PutBucketLifecycleConfiguration", s3.KindInvalid)
	deleteNI := notImplemented("DeleteBucketLifecycle")
	runSettingCases(t, []settingCase{
		{name: "none wanted, none there", fake: &fakeS3{},
			apply: exclusiveLifecycle(nil), check: wantRules()},
		{name: "none wanted (empty slice), none there", fake: &fakeS3{},
			apply: exclusiveLifecycle([]s3.LifecycleRule{}), check: wantRules()},
		{name: "equal", fake: &fakeS3{lifecycle: []s3.LifecycleRule{ruleA, ruleB}},
			apply: exclusiveLifecycle([]s3.LifecycleRule{ruleA, ruleB}), check: wantRules(ruleA, ruleB)},
		{name: "equal, store returns another order", fake: &fakeS3{lifecycle: []s3.LifecycleRule{ruleC, ruleA, ruleB}},
			apply: exclusiveLifecycle(lifecycleRules(&bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{
				{ID: "b", AbortIncompleteMultipartUploadDays: ptr.To[int32](7)},
				{ID: "c", Prefix: "tmp/", NoncurrentVersionExpirationDays: ptr.To[int32](3)},
				{ID: "a", Prefix: "logs/", ExpirationDays: ptr.To[int32](30)},
			}})), check: wantRules(ruleC, ruleA, ruleB)},
		{name: "equal, day counts in distinct pointers", fake: &fakeS3{lifecycle: []s3.LifecycleRule{{ID: "a", Prefix: "logs/", ExpirationDays: ptr.To[int32](30)}}},
			apply: exclusiveLifecycle([]s3.LifecycleRule{ruleA}), check: wantRules(ruleA)},
		{name: "none there, rules wanted", fake: &fakeS3{},
			apply: exclusiveLifecycle([]s3.LifecycleRule{ruleA, ruleB}), wantWrote: true, wantWrites: []string{"PutBucketLifecycle"}, check: wantRules(ruleA, ruleB)},
		{name: "days differ", fake: &fakeS3{lifecycle: []s3.LifecycleRule{ruleA}},
			apply: exclusiveLifecycle([]s3.LifecycleRule{ruleALonger}), wantWrote: true, wantWrites: []string{"PutBucketLifecycle"}, check: wantRules(ruleALonger)},
		{name: "prefix differs", fake: &fakeS3{lifecycle: []s3.LifecycleRule{ruleA}},
			apply: exclusiveLifecycle([]s3.LifecycleRule{ruleAOtherPrefix}), wantWrote: true, wantWrites: []string{"PutBucketLifecycle"}, check: wantRules(ruleAOtherPrefix)},
		{name: "rule added", fake: &fakeS3{lifecycle: []s3.LifecycleRule{ruleA}},
			apply: exclusiveLifecycle([]s3.LifecycleRule{ruleA, ruleB}), wantWrote: true, wantWrites: []string{"PutBucketLifecycle"}, check: wantRules(ruleA, ruleB)},
		{name: "one rule removed", fake: &fakeS3{lifecycle: []s3.LifecycleRule{ruleA, ruleB}},
			apply: exclusiveLifecycle([]s3.LifecycleRule{ruleB}), wantWrote: true, wantWrites: []string{"PutBucketLifecycle"}, check: wantRules(ruleB)},
		{name: "spec removes lifecycle: deleted", fake: &fakeS3{lifecycle: []s3.LifecycleRule{ruleA, ruleB}},
			apply: exclusiveLifecycle(nil), wantWrote: true, wantWrites: []string{"DeleteBucketLifecycle"}, check: wantRules()},
		{name: "spec has empty rule list: deleted", fake: &fakeS3{lifecycle: []s3.LifecycleRule{ruleA}},
			apply: exclusiveLifecycle(lifecycleRules(&bkv1.Lifecycle{})), wantWrote: true, wantWrites: []string{"DeleteBucketLifecycle"}, check: wantRules()},
		{name: "store without lifecycle, rules wanted: error surfaces", fake: &fakeS3{errs: map[string]error{"GetBucketLifecycle": getNI}},
			apply: exclusiveLifecycle([]s3.LifecycleRule{ruleA}), wantErr: getNI},
		{name: "store without lifecycle, nothing wanted: fine", fake: &fakeS3{errs: map[string]error{"GetBucketLifecycle": getNI}},
			apply: exclusiveLifecycle(nil)},
		{name: "read refused, nothing wanted: error surfaces", fake: &fakeS3{errs: map[string]error{"GetBucketLifecycle": getDenied}},
			apply: exclusiveLifecycle(nil), wantErr: getDenied},
		{name: "write refused", fake: &fakeS3{errs: map[string]error{"PutBucketLifecycle": putInvalid}},
			apply: exclusiveLifecycle([]s3.LifecycleRule{ruleA}), wantWrote: true, wantWrites: []string{"PutBucketLifecycle"}, wantErr: putInvalid, check: wantRules()},
		{name: "delete not implemented", fake: &fakeS3{lifecycle: []s3.LifecycleRule{ruleA}, errs: map[string]error{"DeleteBucketLifecycle": deleteNI}},
			apply: exclusiveLifecycle(nil), wantWrote: true, wantWrites: []string{"DeleteBucketLifecycle"}, wantErr: deleteNI, check: wantRules(ruleA)},
	})
}

func TestSettingLifecycleRules(t *testing.T) {
	if got := lifecycleRules(nil); got != nil {
		t.Errorf("lifecycleRules(nil) = %+v, want nil", got)
	}
	if got := lifecycleRules(&bkv1.Lifecycle{}); len(got) != 0 {
		t.Errorf("lifecycleRules(no rules) = %+v, want none", got)
	}
	spec := &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{
		{ID: "z-last", Prefix: "z/", ExpirationDays: ptr.To[int32](1)},
		{ID: "a-first", NoncurrentVersionExpirationDays: ptr.To[int32](2), AbortIncompleteMultipartUploadDays: ptr.To[int32](3)},
		{ID: "m-middle", Prefix: "m/", ExpirationDays: ptr.To[int32](4), NoncurrentVersionExpirationDays: ptr.To[int32](5), AbortIncompleteMultipartUploadDays: ptr.To[int32](6)},
	}}
	want := []s3.LifecycleRule{
		{ID: "a-first", NoncurrentVersionExpirationDays: ptr.To[int32](2), AbortIncompleteMultipartUploadDays: ptr.To[int32](3)},
		{ID: "m-middle", Prefix: "m/", ExpirationDays: ptr.To[int32](4), NoncurrentVersionExpirationDays: ptr.To[int32](5), AbortIncompleteMultipartUploadDays: ptr.To[int32](6)},
		{ID: "z-last", Prefix: "z/", ExpirationDays: ptr.To[int32](1)},
	}
	if got := lifecycleRules(spec); !reflect.DeepEqual(got, want) {
		t.Errorf("lifecycleRules = %+v, want %+v", got, want)
	}
	if spec.Rules[0].ID != "z-last" {
		t.Error("lifecycleRules reordered the spec's own rules")
	}
}

func TestSettingPublicAccess(t *testing.T) {
	partial := s3.PublicAccessBlock{BlockPublicAcls: true, IgnorePublicAcls: true}
	wantPAB := func(want *s3.PublicAccessBlock) func(*testing.T, *fakeS3) {
		return func(t *testing.T, f *fakeS3) {
			if !reflect.DeepEqual(f.pab, want) {
				t.Errorf("public access block = %+v, want %+v", f.pab, want)
			}
		}
	}
	getNI := notImplemented("GetPublicAccessBlock")
	getDenied := s3Err("GetPublicAccessBlock", s3.KindAccessDenied)
	putNI := notImplemented("PutPublicAccessBlock")
	runSettingCases(t, []settingCase{
		{name: "blocked: already fully blocked", fake: &fakeS3{pab: &fullBlock},
			apply: publicAccessSetting(true), check: wantPAB(&fullBlock)},
		{name: "blocked: none there", fake: &fakeS3{},
			apply: publicAccessSetting(true), wantWrote: true, wantWrites: []string{"PutPublicAccessBlock"}, check: wantPAB(&fullBlock)},
		{name: "blocked: all-false block there", fake: &fakeS3{pab: &s3.PublicAccessBlock{}},
			apply: publicAccessSetting(true), wantWrote: true, wantWrites: []string{"PutPublicAccessBlock"}, check: wantPAB(&fullBlock)},
		{name: "blocked: partial block there", fake: &fakeS3{pab: &partial},
			apply: publicAccessSetting(true), wantWrote: true, wantWrites: []string{"PutPublicAccessBlock"}, check: wantPAB(&fullBlock)},
		{name: "blocked: store without public access block answers an error", fake: &fakeS3{errs: map[string]error{"GetPublicAccessBlock": getNI}},
			apply: publicAccessSetting(true), wantErr: getNI},
		{name: "blocked: store refuses the write as not implemented", fake: &fakeS3{errs: map[string]error{"PutPublicAccessBlock": putNI}},
			apply: publicAccessSetting(true), wantWrote: true, wantWrites: []string{"PutPublicAccessBlock"}, wantErr: putNI, check: wantPAB(nil)},
		{name: "blocked: read refused", fake: &fakeS3{errs: map[string]error{"GetPublicAccessBlock": getDenied}},
			apply: publicAccessSetting(true), wantErr: getDenied},
		{name: "allowed: none there", fake: &fakeS3{},
			apply: publicAccessSetting(false), check: wantPAB(nil)},
		{name: "allowed: all-false block there", fake: &fakeS3{pab: &s3.PublicAccessBlock{}},
			apply: publicAccessSetting(false), check: wantPAB(&s3.PublicAccessBlock{})},
		{name: "allowed: fully blocked, deleted", fake: &fakeS3{pab: &fullBlock},
			apply: publicAccessSetting(false), wantWrote: true, wantWrites: []string{"DeletePublicAccessBlock"}, check: wantPAB(nil)},
		{name: "allowed: partial block, deleted", fake: &fakeS3{pab: &partial},
			apply: publicAccessSetting(false), wantWrote: true, wantWrites: []string{"DeletePublicAccessBlock"}, check: wantPAB(nil)},
		{name: "allowed: store without public access block is fine", fake: &fakeS3{errs: map[string]error{"GetPublicAccessBlock": getNI}},
			apply: publicAccessSetting(false)},
		{name: "allowed: read refused", fake: &fakeS3{errs: map[string]error{"GetPublicAccessBlock": getDenied}},
			apply: publicAccessSetting(false), wantErr: getDenied},
	})
}

const (
	specPolicy = `{"Version":"2012-10-17","Statement":[{"Sid":"read","Effect":"Allow","Principal":"*","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::b/*"]}]}`
	// What a store may answer for specPolicy: keys reordered, whitespace, and
	// one-element arrays collapsed to their element.
	storedPolicy = `{
  "Statement": [ { "Resource": "arn:aws:s3:::b/*", "Action": "s3:GetObject", "Principal": "*", "Effect": "Allow", "Sid": "read" } ],
  "Version": "2012-10-17"
}`
	twoActionsPolicy         = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"]}]}`
	twoActionsPolicyReversed = `{"Statement":[{"Resource":["arn:aws:s3:::b/*","arn:aws:s3:::b"],"Action":["s3:ListBucket","s3:GetObject"],"Principal":"*","Effect":"Allow"}],"Version":"2012-10-17"}`
	writePolicy              = `{"Version":"2012-10-17","Statement":[{"Sid":"read","Effect":"Allow","Principal":"*","Action":["s3:PutObject"],"Resource":["arn:aws:s3:::b/*"]}]}`
)

func TestSettingPolicy(t *testing.T) {
	wantPolicy := func(want string) func(*testing.T, *fakeS3) {
		return func(t *testing.T, f *fakeS3) {
			if f.policy != want {
				t.Errorf("policy = %q, want %q", f.policy, want)
			}
		}
	}
	getNI := notImplemented("GetBucketPolicy")
	getDenied := s3Err("GetBucketPolicy", s3.KindAccessDenied)
	putInvalid := s3Err("PutBucketPolicy", s3.KindInvalid)
	runSettingCases(t, []settingCase{
		{name: "none wanted, none there", fake: &fakeS3{},
			apply: policySetting(""), check: wantPolicy("")},
		{name: "identical text", fake: &fakeS3{policy: specPolicy},
			apply: policySetting(specPolicy), check: wantPolicy(specPolicy)},
		{name: "reformatted by the store: reordered keys, string for one-element array", fake: &fakeS3{policy: storedPolicy},
			apply: policySetting(specPolicy), check: wantPolicy(storedPolicy)},
		{name: "arrays in another order", fake: &fakeS3{policy: twoActionsPolicyReversed},
			apply: policySetting(twoActionsPolicy), check: wantPolicy(twoActionsPolicyReversed)},
		{name: "none there, policy wanted", fake: &fakeS3{},
			apply: policySetting(specPolicy), wantWrote: true, wantWrites: []string{"PutBucketPolicy"}, check: wantPolicy(specPolicy)},
		{name: "different action", fake: &fakeS3{policy: storedPolicy},
			apply: policySetting(writePolicy), wantWrote: true, wantWrites: []string{"PutBucketPolicy"}, check: wantPolicy(writePolicy)},
		{name: "one action more", fake: &fakeS3{policy: specPolicy},
			apply: policySetting(twoActionsPolicy), wantWrote: true, wantWrites: []string{"PutBucketPolicy"}, check: wantPolicy(twoActionsPolicy)},
		{name: "store answers something that is not JSON", fake: &fakeS3{policy: "<Policy/>"},
			apply: policySetting(specPolicy), wantWrote: true, wantWrites: []string{"PutBucketPolicy"}, check: wantPolicy(specPolicy)},
		{name: "spec removes policy: deleted", fake: &fakeS3{policy: storedPolicy},
			apply: policySetting(""), wantWrote: true, wantWrites: []string{"DeleteBucketPolicy"}, check: wantPolicy("")},
		{name: "store without policies, policy wanted: error surfaces", fake: &fakeS3{errs: map[string]error{"GetBucketPolicy": getNI}},
			apply: policySetting(specPolicy), wantErr: getNI},
		{name: "store without policies, nothing wanted: fine", fake: &fakeS3{errs: map[string]error{"GetBucketPolicy": getNI}},
			apply: policySetting("")},
		{name: "read refused", fake: &fakeS3{errs: map[string]error{"GetBucketPolicy": getDenied}},
			apply: policySetting(""), wantErr: getDenied},
		{name: "policy refused as invalid", fake: &fakeS3{errs: map[string]error{"PutBucketPolicy": putInvalid}},
			apply: policySetting(specPolicy), wantWrote: true, wantWrites: []string{"PutBucketPolicy"}, wantErr: putInvalid, check: wantPolicy("")},
	})
}

// TestPolicyDocument: nil, null and an empty raw value all mean no policy.
func TestPolicyDocument(t *testing.T) {
	for _, spec := range []*apiextensionsv1.JSON{nil, {Raw: []byte("null")}, {}} {
		if got := policyDocument(spec); got != "" {
			t.Errorf("policyDocument(%v) = %q, want none", spec, got)
		}
	}
	if got := policyDocument(&apiextensionsv1.JSON{Raw: []byte(specPolicy)}); got != specPolicy {
		t.Errorf("policyDocument = %q, want %q", got, specPolicy)
	}
}

func settingNames(settings []setting) []string {
	var out []string
	for _, s := range settings {
		out = append(out, s.name)
	}
	return out
}

// newSpecBucket is a StorageBucket that created its bucket "b" itself: everything on
// that bucket is the operator's (see managedConfig).
func newSpecBucket() *bkv1.StorageBucket {
	return &bkv1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "data", UID: "1111-aaaa", Generation: 1},
		Spec: bkv1.StorageBucketSpec{
			ObjectStoreRef: bkv1.ObjectStoreReference{Name: "store"},
			PublicAccess:   bkv1.PublicAccessBlocked,
		},
		Status: bkv1.StorageBucketStatus{CreateIntent: &bkv1.CreateIntent{BucketName: "b", UID: "1111-aaaa"}},
	}
}

func allMine(string) bool { return true }

// exclusiveTags is the tags setting of a bucket the operator created: want is the whole set.
func exclusiveTags(want map[string]string) applyFunc { return tagsSetting(nil, want, allMine) }

// exclusiveLifecycle is the lifecycle setting of a bucket the operator created.
func exclusiveLifecycle(want []s3.LifecycleRule) applyFunc { return lifecycleSetting(want, allMine) }

// acceptedPolicy is sb's policy as the guardrails pass it on to the configuration step
// of bucket "b" (canonical), "" for none.
func acceptedPolicy(t *testing.T, sb *bkv1.StorageBucket) string {
	t.Helper()
	policy, err := canonicalSpecPolicy(sb, "b")
	if err != nil {
		t.Fatalf("the guardrails refuse the test's policy: %v", err)
	}
	return policy
}

// canonicalSpecPolicy is sb's policy in the canonical form the guardrails give it.
func canonicalSpecPolicy(sb *bkv1.StorageBucket, bucket string) (string, error) {
	raw := policyDocument(sb.Spec.Policy)
	if raw == "" {
		return "", nil
	}
	report, err := guardrail.InspectPolicy([]byte(raw), bucket, nil)
	return report.Canonical, err
}

// applyAll runs every desired setting once, as reconcileConfiguration does.
func applyAll(t *testing.T, sb *bkv1.StorageBucket, f *fakeS3) []string {
	t.Helper()
	var changed []string
	for _, s := range desiredSettings(sb, testOwner(sb), managedConfigOf(sb, "b"), acceptedPolicy(t, sb)) {
		wrote, err := s.apply(context.Background(), f, "b")
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if wrote {
			changed = append(changed, s.name)
		}
	}
	return changed
}
