package controller

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// fakeS3 is an in-memory bucket configuration behind s3.Client. Only the configuration
// methods are implemented; any other method panics on the nil embedded interface.
type fakeS3 struct {
	s3.Client

	versioning s3.VersioningStatus
	tags       map[string]string
	lifecycle  []s3.LifecycleRule
	pab        *s3.PublicAccessBlock
	policy     string

	// errs makes the named method fail with the given error (state left unchanged).
	errs map[string]error
	// reads and writes list the methods called, in order; a failed write is listed too.
	reads, writes []string
}

var _ s3.Client = (*fakeS3)(nil)

func (f *fakeS3) read(op string) error {
	f.reads = append(f.reads, op)
	return f.errs[op]
}

func (f *fakeS3) write(op string) error {
	f.writes = append(f.writes, op)
	return f.errs[op]
}

func (f *fakeS3) GetBucketVersioning(_ context.Context, _ string) (s3.VersioningStatus, error) {
	if err := f.read("GetBucketVersioning"); err != nil {
		return "", err
	}
	return f.versioning, nil
}

func (f *fakeS3) PutBucketVersioning(_ context.Context, _ string, status s3.VersioningStatus) error {
	if err := f.write("PutBucketVersioning"); err != nil {
		return err
	}
	f.versioning = status
	return nil
}

func (f *fakeS3) GetBucketTagging(_ context.Context, _ string) (map[string]string, error) {
	if err := f.read("GetBucketTagging"); err != nil {
		return nil, err
	}
	out := maps.Clone(f.tags)
	if out == nil {
		out = map[string]string{} // the interface promises a non-nil map
	}
	return out, nil
}

func (f *fakeS3) PutBucketTagging(_ context.Context, _ string, tags map[string]string) error {
	if err := f.write("PutBucketTagging"); err != nil {
		return err
	}
	f.tags = maps.Clone(tags)
	return nil
}

func (f *fakeS3) GetBucketLifecycle(_ context.Context, _ string) ([]s3.LifecycleRule, error) {
	if err := f.read("GetBucketLifecycle"); err != nil {
		return nil, err
	}
	if len(f.lifecycle) == 0 {
		return nil, nil
	}
	// Stores do not keep rule order; the real client sorts, the fake returns them as
	// stored so the setting's own sorting is exercised too.
	return slices.Clone(f.lifecycle), nil
}

func (f *fakeS3) PutBucketLifecycle(_ context.Context, _ string, rules []s3.LifecycleRule) error {
	if err := f.write("PutBucketLifecycle"); err != nil {
		return err
	}
	f.lifecycle = slices.Clone(rules)
	return nil
}

func (f *fakeS3) DeleteBucketLifecycle(_ context.Context, _ string) error {
	if err := f.write("DeleteBucketLifecycle"); err != nil {
		return err
	}
	f.lifecycle = nil
	return nil
}

func (f *fakeS3) GetPublicAccessBlock(_ context.Context, _ string) (*s3.PublicAccessBlock, error) {
	if err := f.read("GetPublicAccessBlock"); err != nil {
		return nil, err
	}
	if f.pab == nil {
		return nil, nil
	}
	c := *f.pab
	return &c, nil
}

func (f *fakeS3) PutPublicAccessBlock(_ context.Context, _ string, pab s3.PublicAccessBlock) error {
	if err := f.write("PutPublicAccessBlock"); err != nil {
		return err
	}
	f.pab = &pab
	return nil
}

func (f *fakeS3) DeletePublicAccessBlock(_ context.Context, _ string) error {
	if err := f.write("DeletePublicAccessBlock"); err != nil {
		return err
	}
	f.pab = nil
	return nil
}

func (f *fakeS3) GetBucketPolicy(_ context.Context, _ string) (string, error) {
	if err := f.read("GetBucketPolicy"); err != nil {
		return "", err
	}
	return f.policy, nil
}

func (f *fakeS3) PutBucketPolicy(_ context.Context, _ string, policy string) error {
	if err := f.write("PutBucketPolicy"); err != nil {
		return err
	}
	f.policy = policy
	return nil
}

func (f *fakeS3) DeleteBucketPolicy(_ context.Context, _ string) error {
	if err := f.write("DeleteBucketPolicy"); err != nil {
		return err
	}
	f.policy = ""
	return nil
}

func notImplemented(op string) error {
	return &s3.Error{Op: op, Bucket: "b", Kind: s3.KindNotImplemented, Code: "NotImplemented", StatusCode: 501}
}

func s3Err(op string, kind s3.Kind) error { return &s3.Error{Op: op, Bucket: "b", Kind: kind} }

var fullBlock = s3.PublicAccessBlock{BlockPublicAcls: true, IgnorePublicAcls: true, BlockPublicPolicy: true, RestrictPublicBuckets: true}

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
	raw := func(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }
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
		{name: "none wanted (nil), none there", fake: &fakeS3{},
			apply: policySetting(nil), check: wantPolicy("")},
		{name: "none wanted (null), none there", fake: &fakeS3{},
			apply: policySetting(raw("null")), check: wantPolicy("")},
		{name: "none wanted (empty raw), none there", fake: &fakeS3{},
			apply: policySetting(&apiextensionsv1.JSON{}), check: wantPolicy("")},
		{name: "identical text", fake: &fakeS3{policy: specPolicy},
			apply: policySetting(raw(specPolicy)), check: wantPolicy(specPolicy)},
		{name: "reformatted by the store: reordered keys, string for one-element array", fake: &fakeS3{policy: storedPolicy},
			apply: policySetting(raw(specPolicy)), check: wantPolicy(storedPolicy)},
		{name: "arrays in another order", fake: &fakeS3{policy: twoActionsPolicyReversed},
			apply: policySetting(raw(twoActionsPolicy)), check: wantPolicy(twoActionsPolicyReversed)},
		{name: "none there, policy wanted", fake: &fakeS3{},
			apply: policySetting(raw(specPolicy)), wantWrote: true, wantWrites: []string{"PutBucketPolicy"}, check: wantPolicy(specPolicy)},
		{name: "different action", fake: &fakeS3{policy: storedPolicy},
			apply: policySetting(raw(writePolicy)), wantWrote: true, wantWrites: []string{"PutBucketPolicy"}, check: wantPolicy(writePolicy)},
		{name: "one action more", fake: &fakeS3{policy: specPolicy},
			apply: policySetting(raw(twoActionsPolicy)), wantWrote: true, wantWrites: []string{"PutBucketPolicy"}, check: wantPolicy(twoActionsPolicy)},
		{name: "store answers something that is not JSON", fake: &fakeS3{policy: "<Policy/>"},
			apply: policySetting(raw(specPolicy)), wantWrote: true, wantWrites: []string{"PutBucketPolicy"}, check: wantPolicy(specPolicy)},
		{name: "spec removes policy (nil): deleted", fake: &fakeS3{policy: storedPolicy},
			apply: policySetting(nil), wantWrote: true, wantWrites: []string{"DeleteBucketPolicy"}, check: wantPolicy("")},
		{name: "spec removes policy (null): deleted", fake: &fakeS3{policy: storedPolicy},
			apply: policySetting(raw("null")), wantWrote: true, wantWrites: []string{"DeleteBucketPolicy"}, check: wantPolicy("")},
		{name: "store without policies, policy wanted: error surfaces", fake: &fakeS3{errs: map[string]error{"GetBucketPolicy": getNI}},
			apply: policySetting(raw(specPolicy)), wantErr: getNI},
		{name: "store without policies, nothing wanted: fine", fake: &fakeS3{errs: map[string]error{"GetBucketPolicy": getNI}},
			apply: policySetting(nil)},
		{name: "read refused", fake: &fakeS3{errs: map[string]error{"GetBucketPolicy": getDenied}},
			apply: policySetting(nil), wantErr: getDenied},
		{name: "policy refused as invalid", fake: &fakeS3{errs: map[string]error{"PutBucketPolicy": putInvalid}},
			apply: policySetting(raw(specPolicy)), wantWrote: true, wantWrites: []string{"PutBucketPolicy"}, wantErr: putInvalid, check: wantPolicy("")},
	})
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

// applyAll runs every desired setting once, as reconcileConfiguration does.
func applyAll(t *testing.T, sb *bkv1.StorageBucket, f *fakeS3) []string {
	t.Helper()
	var changed []string
	for _, s := range desiredSettings(sb, testOwner(sb), managedConfigOf(sb, "b")) {
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

func TestSettingsDesired(t *testing.T) {
	all := []string{"versioning", "tags", "lifecycle", "public access block", "policy"}
	withoutVersioning := all[1:]

	t.Run("versioning unset means no versioning setting", func(t *testing.T) {
		sb := newSpecBucket()
		if got := settingNames(desiredSettings(sb, testOwner(sb), managedConfigOf(sb, "b"))); !slices.Equal(got, withoutVersioning) {
			t.Errorf("settings = %v, want %v", got, withoutVersioning)
		}
		// Whatever the bucket's versioning is, it is neither read nor written.
		for _, have := range []s3.VersioningStatus{s3.VersioningOff, s3.VersioningEnabled, s3.VersioningSuspended} {
			f := &fakeS3{versioning: have}
			applyAll(t, sb, f)
			if slices.Contains(f.reads, "GetBucketVersioning") || slices.Contains(f.writes, "PutBucketVersioning") || f.versioning != have {
				t.Errorf("versioning %q touched: reads %v, writes %v, now %q", have, f.reads, f.writes, f.versioning)
			}
		}
	})

	for _, v := range []bkv1.VersioningState{bkv1.VersioningEnabled, bkv1.VersioningSuspended} {
		t.Run("versioning "+string(v), func(t *testing.T) {
			sb := newSpecBucket()
			sb.Spec.Versioning = v
			if got := settingNames(desiredSettings(sb, testOwner(sb), managedConfigOf(sb, "b"))); !slices.Equal(got, all) {
				t.Errorf("settings = %v, want %v", got, all)
			}
			f := &fakeS3{}
			applyAll(t, sb, f)
			if f.versioning != s3.VersioningStatus(v) {
				t.Errorf("versioning = %q, want %q", f.versioning, v)
			}
		})
	}

	t.Run("only the public access block is optional on a store", func(t *testing.T) {
		sb := newSpecBucket()
		sb.Spec.Versioning = bkv1.VersioningEnabled
		for _, s := range desiredSettings(sb, testOwner(sb), managedConfigOf(sb, "b")) {
			if want := s.name == "public access block"; s.optionalOnStore != want {
				t.Errorf("%s: optionalOnStore = %v, want %v", s.name, s.optionalOnStore, want)
			}
		}
	})

	t.Run("tags are the spec's plus the ownership tags", func(t *testing.T) {
		sb := newSpecBucket()
		sb.Spec.Tags = map[string]string{"team": "a", "env": "prod"}
		f := &fakeS3{tags: map[string]string{"stray": "x"}}
		applyAll(t, sb, f)
		want := map[string]string{"team": "a", "env": "prod", bkv1.TagClaim: "team-a/data", bkv1.TagUID: "1111-aaaa"}
		if !maps.Equal(f.tags, want) {
			t.Errorf("tags = %v, want %v", f.tags, want)
		}
		if sb.Spec.Tags[bkv1.TagClaim] != "" || len(sb.Spec.Tags) != 2 {
			t.Errorf("desiredSettings modified spec.tags: %v", sb.Spec.Tags)
		}
	})

	t.Run("no spec tags still writes the ownership tags", func(t *testing.T) {
		sb := newSpecBucket()
		f := &fakeS3{}
		applyAll(t, sb, f)
		if !maps.Equal(f.tags, testOwner(sb).tags()) {
			t.Errorf("tags = %v, want %v", f.tags, testOwner(sb).tags())
		}
	})

	t.Run("ownership tags win over spec tags with the same keys", func(t *testing.T) {
		// Admission rejects reserved keys in spec.tags; this guards the merge order.
		sb := newSpecBucket()
		sb.Spec.Tags = map[string]string{bkv1.TagClaim: "evil/claim", bkv1.TagUID: "", "team": "a"}
		f := &fakeS3{}
		applyAll(t, sb, f)
		want := map[string]string{"team": "a", bkv1.TagClaim: "team-a/data", bkv1.TagUID: "1111-aaaa"}
		if !maps.Equal(f.tags, want) {
			t.Errorf("tags = %v, want %v", f.tags, want)
		}
		if got := testOwner(sb).of(f.tags); got != ownedByUs {
			t.Errorf("bucket after configuration is %s, want ownedByUs", ownershipName(got))
		}
	})

	t.Run("full spec converges, and the second pass writes nothing", func(t *testing.T) {
		sb := newSpecBucket()
		sb.Spec.Versioning = bkv1.VersioningEnabled
		sb.Spec.Tags = map[string]string{"team": "a"}
		sb.Spec.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{
			{ID: "tmp", Prefix: "tmp/", ExpirationDays: ptr.To[int32](1)},
			{ID: "logs", Prefix: "logs/", ExpirationDays: ptr.To[int32](30)},
		}}
		sb.Spec.Policy = &apiextensionsv1.JSON{Raw: []byte(specPolicy)}
		f := &fakeS3{}
		if got := applyAll(t, sb, f); !slices.Equal(got, all) {
			t.Errorf("first pass changed %v, want %v", got, all)
		}
		if len(f.writes) != len(all) {
			t.Errorf("first pass writes = %v, want one per setting", f.writes)
		}
		// The store reformats the policy; that is no reason to write again.
		f.policy = storedPolicy
		f.writes = nil
		if got := applyAll(t, sb, f); len(got) != 0 || len(f.writes) != 0 {
			t.Errorf("second pass changed %v (writes %v), want nothing", got, f.writes)
		}
	})

	t.Run("removing lifecycle and policy from the spec deletes them", func(t *testing.T) {
		sb := newSpecBucket()
		sb.Spec.PublicAccess = bkv1.PublicAccessAllowed
		f := &fakeS3{
			tags:      testOwner(sb).tags(),
			lifecycle: []s3.LifecycleRule{{ID: "logs", ExpirationDays: ptr.To[int32](30)}},
			pab:       &fullBlock,
			policy:    storedPolicy,
		}
		changed := applyAll(t, sb, f)
		wantChanged := []string{"lifecycle", "public access block", "policy"}
		if !slices.Equal(changed, wantChanged) {
			t.Errorf("changed %v, want %v", changed, wantChanged)
		}
		wantWrites := []string{"DeleteBucketLifecycle", "DeletePublicAccessBlock", "DeleteBucketPolicy"}
		if !slices.Equal(f.writes, wantWrites) {
			t.Errorf("writes = %v, want %v", f.writes, wantWrites)
		}
		if f.lifecycle != nil || f.pab != nil || f.policy != "" {
			t.Errorf("left behind: lifecycle %v, public access block %v, policy %q", f.lifecycle, f.pab, f.policy)
		}
	})

	t.Run("public access unset in spec (before defaulting) means blocked", func(t *testing.T) {
		sb := newSpecBucket()
		sb.Spec.PublicAccess = ""
		f := &fakeS3{}
		applyAll(t, sb, f)
		if f.pab == nil || *f.pab != fullBlock {
			t.Errorf("public access block = %+v, want fully blocked", f.pab)
		}
	})
}

// TestSettingsReconcileConfiguration runs the configuration step with the fake store to
// check how it treats the settings' errors.
func TestSettingsReconcileConfiguration(t *testing.T) {
	type result struct {
		// reason of the returned stepError, "" for nil
		reason   string
		terminal bool
		// substrings of the Configured condition (success) or error message
		mentions []string
	}
	tests := []struct {
		name      string
		spec      func(*bkv1.StorageBucketSpec)
		errs      map[string]error
		want      result
		wantState func(t *testing.T, f *fakeS3)
	}{
		{
			name: "everything supported",
			spec: func(s *bkv1.StorageBucketSpec) { s.Versioning = bkv1.VersioningEnabled },
			want: result{mentions: []string{"match the spec"}},
		},
		{
			name: "store without public access block: a note, not a failure",
			errs: map[string]error{"GetPublicAccessBlock": notImplemented("GetPublicAccessBlock")},
			want: result{mentions: []string{"the store has no public access block"}},
		},
		{
			name: "store without public access block, access allowed: no note",
			spec: func(s *bkv1.StorageBucketSpec) { s.PublicAccess = bkv1.PublicAccessAllowed },
			errs: map[string]error{"GetPublicAccessBlock": notImplemented("GetPublicAccessBlock")},
			want: result{mentions: []string{"match the spec"}},
		},
		{
			name: "store without lifecycle, rules asked: reported, the rest applied",
			spec: func(s *bkv1.StorageBucketSpec) {
				s.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{{ID: "a", ExpirationDays: ptr.To[int32](1)}}}
				s.Policy = &apiextensionsv1.JSON{Raw: []byte(specPolicy)}
			},
			errs: map[string]error{"GetBucketLifecycle": notImplemented("GetBucketLifecycleConfiguration")},
			want: result{reason: bkv1.ReasonNotSupportedByStore, terminal: true, mentions: []string{"lifecycle"}},
			wantState: func(t *testing.T, f *fakeS3) {
				if f.policy != specPolicy || f.pab == nil {
					t.Errorf("other settings not applied: policy %q, public access block %v", f.policy, f.pab)
				}
			},
		},
		{
			name: "store without lifecycle, nothing asked: fine",
			errs: map[string]error{"GetBucketLifecycle": notImplemented("GetBucketLifecycleConfiguration")},
			want: result{mentions: []string{"match the spec"}},
		},
		{
			name: "store without versioning and policies: both reported",
			spec: func(s *bkv1.StorageBucketSpec) {
				s.Versioning = bkv1.VersioningEnabled
				s.Policy = &apiextensionsv1.JSON{Raw: []byte(specPolicy)}
			},
			errs: map[string]error{
				"GetBucketVersioning": notImplemented("GetBucketVersioning"),
				"GetBucketPolicy":     notImplemented("GetBucketPolicy"),
			},
			want: result{reason: bkv1.ReasonNotSupportedByStore, terminal: true, mentions: []string{"versioning, policy"}},
		},
		{
			name: "policy refused as invalid: terminal config failure",
			spec: func(s *bkv1.StorageBucketSpec) { s.Policy = &apiextensionsv1.JSON{Raw: []byte(specPolicy)} },
			errs: map[string]error{"PutBucketPolicy": s3Err("PutBucketPolicy", s3.KindInvalid)},
			want: result{reason: bkv1.ReasonConfigFailed, terminal: true, mentions: []string{"applying policy"}},
		},
		{
			name: "throttled: transient",
			errs: map[string]error{"GetBucketTagging": s3Err("GetBucketTagging", s3.KindThrottled)},
			want: result{reason: bkv1.ReasonThrottled, mentions: []string{"applying tags"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSpecBucket()
			if tc.spec != nil {
				tc.spec(&sb.Spec)
			}
			f := &fakeS3{errs: tc.errs}
			r := &StorageBucketReconciler{
				Recorder:     events.NewFakeRecorder(10),
				Clock:        clocktesting.NewFakePassiveClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)),
				SyncInterval: time.Hour,
			}
			scope := &bucketScope{
				sb:     sb,
				store:  &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "store", UID: "s1", Generation: 1}},
				s3:     f,
				bucket: "b",
			}
			err := configurePass(r, scope)
			var text string
			if tc.want.reason == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				c := findCondition(sb.Status.Conditions, bkv1.ConditionConfigured)
				if c == nil || c.Status != metav1.ConditionTrue || c.Reason != bkv1.ReasonConfigApplied {
					t.Fatalf("Configured = %+v, want True/%s", c, bkv1.ReasonConfigApplied)
				}
				text = c.Message
				if tc.want.mentions[0] == "match the spec" && strings.Contains(text, "the store has no") {
					t.Errorf("unexpected note in %q", text)
				}
			} else {
				se := asStepError(err, "")
				if err == nil || se.Reason != tc.want.reason || se.Terminal != tc.want.terminal {
					t.Fatalf("error = %v (%+v), want reason %s terminal %v", err, se, tc.want.reason, tc.want.terminal)
				}
				text = se.Message
			}
			for _, m := range tc.want.mentions {
				if !strings.Contains(text, m) {
					t.Errorf("%q does not mention %q", text, m)
				}
			}
			if tc.wantState != nil {
				tc.wantState(t, f)
			}
		})
	}
}

// TestSettingsReconcileConfigurationMemo checks that a finished sync is not repeated
// until something changes or SyncInterval passes.
func TestSettingsReconcileConfigurationMemo(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	r := &StorageBucketReconciler{Recorder: events.NewFakeRecorder(10), Clock: clk, SyncInterval: time.Hour}
	sb := newSpecBucket()
	sb.Status.BucketName = "b"
	setCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionProvisioned, metav1.ConditionTrue, bkv1.ReasonBucketCreated, "created")
	f := &fakeS3{}
	scope := &bucketScope{sb: sb, store: &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "store", UID: "s1", Generation: 1}}, s3: f, bucket: "b"}

	if err := configurePass(r, scope); err != nil {
		t.Fatal(err)
	}
	reads := len(f.reads)
	if reads == 0 {
		t.Fatal("first sync read nothing")
	}
	clk.SetTime(t0.Add(59 * time.Minute))
	if err := configurePass(r, scope); err != nil {
		t.Fatal(err)
	}
	if len(f.reads) != reads {
		t.Errorf("a sync within SyncInterval read the store again: %v", f.reads[reads:])
	}
	clk.SetTime(t0.Add(time.Hour))
	f.tags = map[string]string{"drift": "x"}
	f.writes = nil
	if err := configurePass(r, scope); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.writes, []string{"PutBucketTagging"}) || !maps.Equal(f.tags, testOwner(sb).tags()) {
		t.Errorf("drift after SyncInterval: writes %v, tags %v", f.writes, f.tags)
	}
}

// configurePass runs the configuration step as a reconcile does: whether this pass
// syncs is decided first (by the bucket step in the real flow).
func configurePass(r *StorageBucketReconciler, scope *bucketScope) error {
	scope.syncing = r.syncDue(scope)
	return r.reconcileConfiguration(context.Background(), scope)
}

// testOwner is the owner the unit tests' reconcilers (no ClusterID) write.
func testOwner(sb *bkv1.StorageBucket) owner { return (&StorageBucketReconciler{}).ownerOf(sb) }
