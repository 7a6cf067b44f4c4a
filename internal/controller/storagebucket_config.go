package controller

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
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
}

// reconcileConfiguration brings versioning, tags, lifecycle, public access and policy in
// line with the spec. It runs on a spec change and every SyncInterval, not on every
// reconcile, so out-of-band drift is corrected without a read storm.
func (r *StorageBucketReconciler) reconcileConfiguration(ctx context.Context, scope *bucketScope) error {
	sb := scope.sb
	if !scope.syncing {
		// Not re-read this time: the last verdict stands, including what the store lacks.
		if c := findCondition(sb.Status.Conditions, bkv1.ConditionConfigured); c != nil && c.Reason == bkv1.ReasonNotSupportedByStore {
			return terminalf(c.Reason, "%s", c.Message)
		}
		return nil
	}
	var changed, unsupported, notes []string
	for _, s := range desiredSettings(sb, r.ownerOf(sb)) {
		wrote, err := s.apply(ctx, scope.s3, scope.bucket)
		switch {
		case s3.KindOf(err) == s3.KindNotImplemented && s.optionalOnStore:
			notes = append(notes, s.name)
		case s3.KindOf(err) == s3.KindNotImplemented:
			unsupported = append(unsupported, s.name)
		case err != nil:
			return asStepError(err, fmt.Sprintf("applying %s to bucket %q", s.name, scope.bucket))
		case wrote:
			changed = append(changed, s.name)
		}
	}
	if len(changed) > 0 && !scope.created {
		r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonConfigApplied, "Configure", "applied %s to bucket %s", strings.Join(changed, ", "), scope.bucket)
	}
	if len(unsupported) > 0 {
		r.synced.done(client.ObjectKeyFromObject(sb), sb.UID, syncVersion(scope), r.Clock.Now())
		return terminalf(bkv1.ReasonNotSupportedByStore, "ObjectStore %q does not support %s for bucket %q; the other settings are applied",
			scope.store.Name, strings.Join(unsupported, ", "), scope.bucket)
	}
	msg := "versioning, tags, lifecycle, public access and policy match the spec"
	if len(notes) > 0 {
		msg += fmt.Sprintf(" (the store has no %s; its buckets are private unless a policy grants access)", strings.Join(notes, ", "))
	}
	setCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionConfigured, metav1.ConditionTrue, bkv1.ReasonConfigApplied, msg)
	r.synced.done(client.ObjectKeyFromObject(sb), sb.UID, syncVersion(scope), r.Clock.Now())
	return nil
}

// desiredSettings lists the settings of a spec. Versioning unset means unmanaged: S3
// cannot turn versioning off, only suspend it, so the operator leaves it alone.
func desiredSettings(sb *bkv1.StorageBucket, me owner) []setting {
	var out []setting
	if sb.Spec.Versioning != "" {
		out = append(out, setting{name: "versioning", apply: versioningSetting(s3.VersioningStatus(sb.Spec.Versioning))})
	}
	tags := maps.Clone(sb.Spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	maps.Copy(tags, me.tags())
	out = append(out,
		setting{name: "tags", apply: tagsSetting(tags)},
		setting{name: "lifecycle", apply: lifecycleSetting(lifecycleRules(sb.Spec.Lifecycle))},
		setting{name: "public access block", apply: publicAccessSetting(sb.Spec.PublicAccess != bkv1.PublicAccessAllowed), optionalOnStore: true},
		setting{name: "policy", apply: policySetting(sb.Spec.Policy)},
	)
	return out
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

// tagsSetting leaves the store's own tags (aws:...) out of both the comparison and the
// write: they cannot be sent back, and the store keeps them.
func tagsSetting(want map[string]string) func(context.Context, s3.Client, string) (bool, error) {
	return func(ctx context.Context, c s3.Client, bucket string) (bool, error) {
		have, err := c.GetBucketTagging(ctx, bucket)
		if err != nil || maps.Equal(withoutSystemTags(have), want) {
			return false, err
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

// lifecycleSetting writes the rules, or deletes the configuration when the spec has
// none: removing rules from the spec removes them from the bucket.
func lifecycleSetting(want []s3.LifecycleRule) func(context.Context, s3.Client, string) (bool, error) {
	return func(ctx context.Context, c s3.Client, bucket string) (bool, error) {
		have, err := c.GetBucketLifecycle(ctx, bucket)
		if err != nil {
			if len(want) == 0 && s3.KindOf(err) == s3.KindNotImplemented {
				return false, nil // nothing asked for, nothing the store could hold
			}
			return false, err
		}
		if len(have) == 0 && len(want) == 0 || reflect.DeepEqual(sortedRules(have), want) {
			return false, nil
		}
		if len(want) == 0 {
			return true, c.DeleteBucketLifecycle(ctx, bucket)
		}
		return true, c.PutBucketLifecycle(ctx, bucket, want)
	}
}

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
// order, whitespace, one-element arrays).
func policySetting(spec *apiextensionsv1.JSON) func(context.Context, s3.Client, string) (bool, error) {
	want := policyDocument(spec)
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

// policyDocument is the spec's policy as a document, or "" when there is none.
func policyDocument(spec *apiextensionsv1.JSON) string {
	if spec == nil || len(spec.Raw) == 0 || string(spec.Raw) == "null" {
		return ""
	}
	return string(spec.Raw)
}
