package storagebucket

import (
	"context"
	"maps"
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
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

func TestSettingsDesired(t *testing.T) {
	all := []string{"versioning", "tags", "lifecycle", "public access block", "policy", "CORS"}
	withoutVersioning := all[1:]

	t.Run("versioning unset means no versioning setting", func(t *testing.T) {
		sb := newSpecBucket()
		if got := settingNames(desiredSettings(sb, testOwner(sb), managedConfigOf(sb, "b"), "")); !slices.Equal(got, withoutVersioning) {
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
			if got := settingNames(desiredSettings(sb, testOwner(sb), managedConfigOf(sb, "b"), "")); !slices.Equal(got, all) {
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
		for _, s := range desiredSettings(sb, testOwner(sb), managedConfigOf(sb, "b"), "") {
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
		if got := testOwner(sb).of(f.tags, false); got != ownedByUs {
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
		sb.Spec.CORS = []bkv1.CORSRule{{AllowedOrigins: []string{"https://app.example.com"}, AllowedMethods: []bkv1.CORSMethod{bkv1.CORSMethodGet}}}
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
		store     func(*fakeS3) // how the store differs, beyond errs
		want      result
		wantState func(t *testing.T, f *fakeS3)
	}{
		{
			name: "everything supported",
			spec: func(s *bkv1.StorageBucketSpec) { s.Versioning = bkv1.VersioningEnabled },
			want: result{mentions: []string{"match the spec"}},
		},
		{
			name:      "store without public access block: a note, not a failure",
			errs:      map[string]error{"GetPublicAccessBlock": notImplemented("GetPublicAccessBlock")},
			want:      result{mentions: []string{"the store has no public access block"}},
			wantState: noPublicAccessBlockWrite,
		},
		{
			name:      "store without public access block, access allowed: no note",
			spec:      func(s *bkv1.StorageBucketSpec) { s.PublicAccess = bkv1.PublicAccessAllowed },
			errs:      map[string]error{"GetPublicAccessBlock": notImplemented("GetPublicAccessBlock")},
			want:      result{mentions: []string{"match the spec"}},
			wantState: noPublicAccessBlockWrite,
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
			name: "store keeping less of a lifecycle rule than it took: reported by name, the rest applied",
			spec: func(s *bkv1.StorageBucketSpec) {
				s.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{{ID: "a", ExpirationDays: ptr.To[int32](1), AbortIncompleteMultipartUploadDays: ptr.To[int32](2)}}}
				s.Policy = &apiextensionsv1.JSON{Raw: []byte(specPolicy)}
			},
			store: func(f *fakeS3) { f.keepsNoAbortUploads = true },
			want: result{reason: bkv1.ReasonNotSupportedByStore, terminal: true,
				mentions: []string{`lifecycle (it keeps no abortIncompleteMultipartUploadDays of rule "a")`}},
			wantState: func(t *testing.T, f *fakeS3) {
				if f.policy != specPolicy || f.pab == nil {
					t.Errorf("other settings not applied: policy %q, public access block %v", f.policy, f.pab)
				}
				if len(f.lifecycle) != 1 || f.lifecycle[0].ExpirationDays == nil {
					t.Errorf("the rule's expiration not applied: %+v", f.lifecycle)
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
			if tc.store != nil {
				tc.store(f)
			}
			r := &Reconciler{
				Recorder:     events.NewFakeRecorder(10),
				Clock:        clocktesting.NewFakePassiveClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)),
				SyncInterval: time.Hour,
			}
			scope := &bucketScope{
				sb:     sb,
				owner:  testOwner(sb),
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
				c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionConfigured)
				if c == nil || c.Status != metav1.ConditionTrue || c.Reason != bkv1.ReasonConfigApplied {
					t.Fatalf("Configured = %+v, want True/%s", c, bkv1.ReasonConfigApplied)
				}
				text = c.Message
				if tc.want.mentions[0] == "match the spec" && strings.Contains(text, "the store has no") {
					t.Errorf("unexpected note in %q", text)
				}
			} else {
				se := reconcile.AsStepError(err, "")
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

// noPublicAccessBlockWrite checks that a store whose GetPublicAccessBlock says it has
// none gets no write of one: MinIO routes a DELETE ?publicAccessBlock to its DeleteBucket,
// which deletes an empty bucket (internal/s3's contract tests pin it).
func noPublicAccessBlockWrite(t *testing.T, f *fakeS3) {
	t.Helper()
	for _, op := range f.writes {
		if strings.Contains(op, "PublicAccessBlock") {
			t.Errorf("%s sent to a store without public access blocks (writes: %v)", op, f.writes)
		}
	}
}

// TestSettingsReconcileConfigurationMemo checks that a finished sync is not repeated
// until something changes or SyncInterval passes.
func TestSettingsReconcileConfigurationMemo(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	r := &Reconciler{Recorder: events.NewFakeRecorder(10), Clock: clk, SyncInterval: time.Hour}
	sb := newSpecBucket()
	sb.Status.BucketName = "b"
	reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionProvisioned, metav1.ConditionTrue, bkv1.ReasonBucketCreated, "created")
	f := &fakeS3{}
	scope := &bucketScope{sb: sb, owner: testOwner(sb), store: &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "store", UID: "s1", Generation: 1}}, s3: f, bucket: "b"}

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
func configurePass(r *Reconciler, scope *bucketScope) error {
	// The guardrails come first in a real pass and pass the policy on, checked; the
	// tests' stores allow no public policy, so only the canonical form is taken here.
	policy, err := canonicalSpecPolicy(scope.sb, scope.bucket)
	if err != nil {
		return err
	}
	scope.policy = policy
	scope.syncing = r.syncDue(scope)
	return r.reconcileConfiguration(context.Background(), scope)
}

// testOwner is the owner the unit tests' reconcilers (no ClusterID) write: with no
// namespace UID, so its tags read as they did before namespace UIDs were recorded.
func testOwner(sb *bkv1.StorageBucket) owner { return (&Reconciler{}).ownerIn(sb, "") }
