package storagebucket

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// setting is one piece of bucket configuration: read it, compare with the spec, write
// only when they differ. A setting the store does not implement is reported by name and
// the others still converge.
type setting struct {
	name string
	// apply reads the current value and writes the desired one if it differs. It
	// returns whether it wrote.
	apply func(ctx context.Context, c s3.Client, bucket string) (bool, error)
	// optionalOnStore: the store may lack the feature and the spec's intent still
	// holds (no public-access block on a store that has no public access at all).
	optionalOnStore bool
	// record notes in the applied record what the operator now manages of this
	// setting; it runs once apply succeeded, so a failed or unsupported setting keeps
	// its earlier record.
	record func(*bkv1.AppliedConfiguration)
}

// reconcileConfiguration brings versioning, tags, lifecycle, public access, policy and
// CORS in line with the spec. It runs on a spec change and every SyncInterval, not on every
// reconcile, so out-of-band drift is corrected without a read storm.
//
// One rule covers every setting the spec leaves out: what the operator applied and the
// spec then drops is removed; what it never applied (found on an adopted bucket, or
// carried there by a move: status.carried) is left alone unless the spec names it. What was applied is recorded in status.applied, in the
// status write the pass makes anyway, so the rule holds across restarts.
func (r *Reconciler) reconcileConfiguration(ctx context.Context, scope *bucketScope) error {
	sb := scope.sb
	if !scope.syncing {
		// Not re-read this time: the last verdict stands, including what the store lacks.
		if c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionConfigured); c != nil && c.Reason == bkv1.ReasonNotSupportedByStore {
			return reconcile.Terminalf(c.Reason, "%s", c.Message)
		}
		return nil
	}
	managed := managedConfigOf(sb, scope.bucket)
	applied := managed.applied
	var changed, unsupported, notes []string
	if scope.quota.named || managed.exclusive || applied.Quota {
		scope.quota.client, scope.quota.err = r.Stores.QuotaClientFor(ctx, scope.store)
	}
	settings := append(desiredSettings(sb, scope.owner, managed, scope.policy), quotaSettings(scope.quota, managed)...)
	for _, s := range settings {
		wrote, err := s.apply(ctx, scope.s3, scope.bucket)
		var less *keptLess
		switch {
		case s3.KindOf(err) == s3.KindNotImplemented && s.optionalOnStore:
			notes = append(notes, s.name)
		case errors.As(err, &less):
			unsupported = append(unsupported, fmt.Sprintf("%s (it keeps no %s)", s.name, less.missing))
		case s3.KindOf(err) == s3.KindNotImplemented:
			unsupported = append(unsupported, s.name)
		case err != nil:
			// What the settings before this one applied is on the bucket: recorded.
			setApplied(sb, applied)
			return reconcile.AsStepError(err, fmt.Sprintf("applying %s to bucket %q", s.name, scope.bucket))
		case wrote:
			changed = append(changed, s.name)
		}
		if (err == nil || less != nil) && s.record != nil { // what the store kept of it is the operator's
			s.record(&applied)
		}
	}
	applied.Hash = desiredHash(scope, scope.owner)
	setApplied(sb, applied)
	if c := sb.Status.Carried; c != nil && c.ObjectStore == scope.store.Name {
		sb.Status.Carried = carriedAfterSpec(c, &sb.Spec) // what the spec now declares is the spec's
	}
	if len(changed) > 0 && !scope.created {
		r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonConfigApplied, "Configure", "applied %s to bucket %s", strings.Join(changed, ", "), scope.bucket)
	}
	now := r.Clock.Now()
	if len(unsupported) > 0 {
		r.synced.done(client.ObjectKeyFromObject(sb), sb.UID, syncVersion(scope), now)
		return reconcile.Terminalf(bkv1.ReasonNotSupportedByStore, "ObjectStore %q does not support %s for bucket %q; the other settings are applied",
			scope.store.Name, strings.Join(unsupported, ", "), scope.bucket)
	}
	msg := "versioning, tags, lifecycle, public access, policy and CORS match the spec"
	if scope.quota.named {
		msg = "versioning, tags, lifecycle, public access, policy, CORS and quota (" + scope.quota.want.String() + ") match the spec"
	}
	msg += objectLockNote(sb)
	if !managed.exclusive {
		msg += "; this bucket was not created by this StorageBucket, so what the spec does not name and the operator never set on it is left as it is"
	}
	if len(notes) > 0 {
		msg += fmt.Sprintf(" (the store has no %s; its buckets are private unless a policy grants access)", strings.Join(notes, ", "))
	}
	reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionConfigured, metav1.ConditionTrue, bkv1.ReasonConfigApplied, msg)
	r.synced.done(client.ObjectKeyFromObject(sb), sb.UID, syncVersion(scope), now)
	return nil
}

// desiredSettings lists the settings of a spec, given what the operator manages on the
// bucket and the spec's policy as the guardrails accepted it (canonical, "" for none).
// A setting the spec leaves out and the operator never applied is not even read: it is
// not the operator's.
func desiredSettings(sb *bkv1.StorageBucket, me owner, managed managedConfig, policy string) []setting {
	var out []setting
	switch {
	case sb.Spec.Versioning != "" || sb.Spec.ObjectLock != nil:
		out = append(out, setting{name: "versioning", apply: versioningSetting(desiredVersioning(sb)),
			record: func(a *bkv1.AppliedConfiguration) { a.Versioning = true }})
	case managed.applied.Versioning:
		out = append(out, setting{name: "versioning", apply: suspendVersioningSetting(),
			record: func(a *bkv1.AppliedConfiguration) { a.Versioning = false }})
	}

	out = append(out, setting{name: "tags", apply: tagsSetting(sb.Spec.Tags, me.tags(), managed.tagIsMine),
		record: func(a *bkv1.AppliedConfiguration) { a.TagKeys = managed.names(slices.Collect(maps.Keys(sb.Spec.Tags))) }})

	rules := lifecycleRules(sb.Spec.Lifecycle)
	if len(rules) > 0 || managed.exclusive || len(managed.applied.LifecycleRules) > 0 {
		ids := make([]string, 0, len(rules))
		for _, rule := range rules {
			ids = append(ids, rule.ID)
		}
		out = append(out, setting{name: "lifecycle", apply: lifecycleSetting(rules, managed.ruleIsMine),
			record: func(a *bkv1.AppliedConfiguration) { a.LifecycleRules = managed.names(ids) }})
	}

	out = append(out, setting{name: "public access block", apply: publicAccessSetting(sb.Spec.PublicAccess != bkv1.PublicAccessAllowed), optionalOnStore: true})

	if policy != "" || managed.ownsPolicy() {
		out = append(out, setting{name: "policy", apply: policySetting(policy),
			record: func(a *bkv1.AppliedConfiguration) { a.Policy = policy != "" && !managed.exclusive }})
	}
	out = append(out, corsSettings(sb, managed)...)
	return append(out, objectLockSettings(sb, managed)...) // after versioning, which it needs
}

func versioningSetting(want s3.VersioningStatus) func(context.Context, s3.Client, string) (bool, error) {
	return func(ctx context.Context, c s3.Client, bucket string) (bool, error) {
		have, err := c.GetBucketVersioning(ctx, bucket)
		if err != nil || have == want {
			return false, err
		}
		return true, c.PutBucketVersioning(ctx, bucket, want)
	}
}

// suspendVersioningSetting undoes versioning the operator enabled and the spec dropped:
// S3 cannot turn versioning off, so Suspended is the nearest to "removed" (no new
// versions; existing ones stay). A bucket already suspended or never versioned is left.
func suspendVersioningSetting() func(context.Context, s3.Client, string) (bool, error) {
	return func(ctx context.Context, c s3.Client, bucket string) (bool, error) {
		have, err := c.GetBucketVersioning(ctx, bucket)
		if err != nil || have != s3.VersioningEnabled {
			return false, err
		}
		return true, c.PutBucketVersioning(ctx, bucket, s3.VersioningSuspended)
	}
}

// tagsSetting merges the spec's tags into the bucket's (see mergeTags). It leaves the
// store's own tags (aws:...) out of both the comparison and the write: they cannot be
// sent back, and the store keeps them.
func tagsSetting(spec, own map[string]string, mine func(string) bool) func(context.Context, s3.Client, string) (bool, error) {
	return func(ctx context.Context, c s3.Client, bucket string) (bool, error) {
		have, err := c.GetBucketTagging(ctx, bucket)
		if err != nil {
			return false, err
		}
		want := mergeTags(have, spec, own, mine)
		if maps.Equal(withoutSystemTags(have), want) {
			return false, nil
		}
		if len(want) > bkv1.MaxBucketTags {
			return false, reconcile.Terminalf(bkv1.ReasonInvalidTags, "bucket %q would carry %d tags (its own, which the operator keeps, the spec's and %d ownership tags); S3 allows %d: remove tags from the spec or from the bucket",
				bucket, len(want), len(own), bkv1.MaxBucketTags)
		}
		return true, c.PutBucketTagging(ctx, bucket, want)
	}
}

func lifecycleRules(l *bkv1.Lifecycle) []s3.LifecycleRule {
	if l == nil {
		return nil
	}
	out := make([]s3.LifecycleRule, 0, len(l.Rules))
	for _, r := range l.Rules {
		out = append(out, s3.LifecycleRule{
			ID:                                 r.ID,
			Prefix:                             r.Prefix,
			ExpirationDays:                     r.ExpirationDays,
			NoncurrentVersionExpirationDays:    r.NoncurrentVersionExpirationDays,
			AbortIncompleteMultipartUploadDays: r.AbortIncompleteMultipartUploadDays,
		})
	}
	return sortedRules(out)
}

func sortedRules(rules []s3.LifecycleRule) []s3.LifecycleRule {
	return slices.SortedFunc(slices.Values(rules), func(a, b s3.LifecycleRule) int { return strings.Compare(a.ID, b.ID) })
}

// lifecycleSetting merges the spec's rules into the bucket's configuration (see
// mergeLifecycle) and writes the whole of it, as S3 replaces a lifecycle configuration
// whole; none left deletes it.
func lifecycleSetting(want []s3.LifecycleRule, mine func(string) bool) func(context.Context, s3.Client, string) (bool, error) {
	return func(ctx context.Context, c s3.Client, bucket string) (bool, error) {
		have, err := c.GetBucketLifecycle(ctx, bucket)
		if err != nil {
			if len(want) == 0 && s3.KindOf(err) == s3.KindNotImplemented {
				return false, nil // nothing asked for, nothing the store could hold
			}
			return false, err
		}
		merged, same := mergeLifecycle(have, want, mine)
		if same {
			return false, nil
		}
		if len(merged) == 0 {
			return true, c.DeleteBucketLifecycle(ctx, bucket)
		}
		if err := c.PutBucketLifecycle(ctx, bucket, merged); err != nil {
			return true, err
		}
		return true, lifecycleKept(ctx, c, bucket, want, mine)
	}
}

// lifecycleKept reads back the rules just written: a store may take a rule and keep less
// of it (MinIO keeps no AbortIncompleteMultipartUpload beside another action), and the
// spec would then never hold though every write succeeded, each sync writing it again.
// What the store dropped is a setting it does not support (*keptLess).
func lifecycleKept(ctx context.Context, c s3.Client, bucket string, want []s3.LifecycleRule, mine func(string) bool) error {
	have, err := c.GetBucketLifecycle(ctx, bucket)
	if err != nil {
		return err
	}
	if _, same := mergeLifecycle(have, want, mine); same {
		return nil
	}
	kept := map[string]s3.LifecycleRule{}
	for _, r := range have {
		kept[r.ID] = r
	}
	var missing []string
	for _, w := range want {
		k, ok := kept[w.ID]
		if !ok {
			missing = append(missing, fmt.Sprintf("rule %q", w.ID))
			continue
		}
		for _, f := range []struct {
			name       string
			want, have *int32
		}{
			{"expirationDays", w.ExpirationDays, k.ExpirationDays},
			{"noncurrentVersionExpirationDays", w.NoncurrentVersionExpirationDays, k.NoncurrentVersionExpirationDays},
			{"abortIncompleteMultipartUploadDays", w.AbortIncompleteMultipartUploadDays, k.AbortIncompleteMultipartUploadDays},
		} {
			if ptr.Deref(f.want, 0) != ptr.Deref(f.have, 0) {
				missing = append(missing, fmt.Sprintf("%s of rule %q", f.name, w.ID))
			}
		}
		if w.Prefix != k.Prefix {
			missing = append(missing, fmt.Sprintf("prefix of rule %q", w.ID))
		}
	}
	if len(missing) == 0 {
		missing = []string{"the rules as written"} // a difference of no field the spec names
	}
	return &keptLess{bucket: bucket, missing: strings.Join(missing, ", ")}
}

// keptLess is a setting the store took and kept only part of: it cannot hold the spec
// there, which is reported as a setting the store does not support
// (s3.KindNotImplemented), with what it dropped.
type keptLess struct {
	bucket, missing string
}

func (e *keptLess) Error() string {
	return fmt.Sprintf("bucket %q keeps no %s: the store took it and dropped it", e.bucket, e.missing)
}

// Unwrap classifies it for s3.KindOf.
func (e *keptLess) Unwrap() error { return &s3.Error{Bucket: e.bucket, Kind: s3.KindNotImplemented} }

func publicAccessSetting(blocked bool) func(context.Context, s3.Client, string) (bool, error) {
	return func(ctx context.Context, c s3.Client, bucket string) (bool, error) {
		have, err := c.GetPublicAccessBlock(ctx, bucket)
		if err != nil {
			if !blocked && s3.KindOf(err) == s3.KindNotImplemented {
				return false, nil
			}
			return false, err
		}
		if !blocked {
			if have == nil || *have == (s3.PublicAccessBlock{}) {
				return false, nil
			}
			return true, c.DeletePublicAccessBlock(ctx, bucket)
		}
		want := s3.PublicAccessBlock{BlockPublicAcls: true, IgnorePublicAcls: true, BlockPublicPolicy: true, RestrictPublicBuckets: true}
		if have != nil && *have == want {
			return false, nil
		}
		return true, c.PutPublicAccessBlock(ctx, bucket, want)
	}
}

// policySetting compares policies as documents, not text: stores reformat them (key
// order, whitespace, one-element arrays). want is the canonical policy the guardrails
// accepted; it replaces the bucket's whole. None ("") deletes it, and desiredSettings
// asks for that only of a policy that is the operator's.
func policySetting(want string) func(context.Context, s3.Client, string) (bool, error) {
	return func(ctx context.Context, c s3.Client, bucket string) (bool, error) {
		have, err := c.GetBucketPolicy(ctx, bucket)
		if err != nil {
			if want == "" && s3.KindOf(err) == s3.KindNotImplemented {
				return false, nil
			}
			return false, err
		}
		switch {
		case have == "" && want == "":
			return false, nil
		case want == "":
			return true, c.DeleteBucketPolicy(ctx, bucket)
		}
		if same, err := s3.EquivalentPolicies(have, want); err == nil && same {
			return false, nil
		}
		return true, c.PutBucketPolicy(ctx, bucket, want)
	}
}

// policyDocument is the spec's policy as the tenant wrote it, or "" when there is none:
// input for the guardrails only. What is sent is the canonical form they return.
func policyDocument(spec *apiextensionsv1.JSON) string {
	if spec == nil || len(spec.Raw) == 0 || string(spec.Raw) == "null" {
		return ""
	}
	return string(spec.Raw)
}
