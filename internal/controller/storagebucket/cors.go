package storagebucket

import (
	"context"
	"slices"

	"k8s.io/utils/ptr"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// corsSettings is the CORS setting of a spec, as the policy's: the spec's rules replace
// the bucket's CORS configuration as a whole, and a spec without rules deletes one that
// is the operator's (on a bucket this claim created, or one it set on an adopted bucket).
// A CORS configuration found on an adopted bucket is not even read while the spec names
// none: it is not the operator's.
func corsSettings(sb *bkv1.StorageBucket, managed managedConfig) []setting {
	want := corsRules(sb.Spec.CORS)
	if len(want) == 0 && !managed.ownsCORS() {
		return nil
	}
	return []setting{{name: "CORS", apply: corsSetting(want),
		record: func(a *bkv1.AppliedConfiguration) { a.CORS = len(want) > 0 && !managed.exclusive }}}
}

// corsRules is the spec's CORS configuration as the store is sent it, in the spec's
// order (the first rule that matches a request answers it).
func corsRules(spec []bkv1.CORSRule) []s3.CORSRule {
	if len(spec) == 0 {
		return nil
	}
	out := make([]s3.CORSRule, 0, len(spec))
	for _, r := range spec {
		methods := make([]string, 0, len(r.AllowedMethods))
		for _, m := range r.AllowedMethods {
			methods = append(methods, string(m))
		}
		out = append(out, s3.CORSRule{
			ID:             r.ID,
			AllowedOrigins: nilIfEmpty(r.AllowedOrigins),
			AllowedMethods: nilIfEmpty(methods),
			AllowedHeaders: nilIfEmpty(r.AllowedHeaders),
			ExposeHeaders:  nilIfEmpty(r.ExposeHeaders),
			MaxAgeSeconds:  r.MaxAgeSeconds,
		})
	}
	return out
}

// corsSetting reads the bucket's CORS configuration and writes the spec's when they
// differ; none wanted deletes the bucket's. When none is wanted, a read the store answers
// NotImplemented (it has no bucket CORS) or AccessDenied is nothing to do: a claim that
// asks for no CORS must not fail because the operator's identity predates the CORS
// actions (s3:GetBucketCORS, s3:PutBucketCORS) in its policy; a CORS configuration it
// cannot read it leaves as it is.
func corsSetting(want []s3.CORSRule) func(context.Context, s3.Client, string) (bool, error) {
	return func(ctx context.Context, c s3.Client, bucket string) (bool, error) {
		have, err := c.GetBucketCors(ctx, bucket)
		if err != nil {
			if k := s3.KindOf(err); len(want) == 0 && (k == s3.KindNotImplemented || k == s3.KindAccessDenied) {
				return false, nil
			}
			return false, err
		}
		switch {
		case sameCORS(have, want):
			return false, nil
		case len(want) == 0:
			return true, c.DeleteBucketCors(ctx, bucket)
		}
		return true, c.PutBucketCors(ctx, bucket, want)
	}
}

// sameCORS compares CORS configurations as a browser sees them: the rules in order, and
// within a rule each list as a set (a store may keep a list in another order or once
// per value).
func sameCORS(a, b []s3.CORSRule) bool {
	return slices.EqualFunc(a, b, func(x, y s3.CORSRule) bool {
		return x.ID == y.ID && ptr.Deref(x.MaxAgeSeconds, 0) == ptr.Deref(y.MaxAgeSeconds, 0) &&
			sameSet(x.AllowedOrigins, y.AllowedOrigins) && sameSet(x.AllowedMethods, y.AllowedMethods) &&
			sameSet(x.AllowedHeaders, y.AllowedHeaders) && sameSet(x.ExposeHeaders, y.ExposeHeaders)
	})
}

func sameSet(a, b []string) bool {
	a, b = slices.Compact(slices.Sorted(slices.Values(a))), slices.Compact(slices.Sorted(slices.Values(b)))
	return slices.Equal(a, b)
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
