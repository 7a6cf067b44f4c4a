package storagebucket

import (
	"context"

	"k8s.io/apimachinery/pkg/api/resource"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/quota"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// desiredQuota is the quota a claim asks of its store: its spec.quota, else the store's
// guardrails.quota.default, with every limit of guardrails.quota.max filled in where
// those leave it out. named is false when none of the three says anything: the bucket's
// quota is then the operator's only if it set one (the absent-settings rule). A spec
// limit above the store's max, or below one, is refused before anything is sent.
func desiredQuota(sb *bkv1.StorageBucket, store *bkv1.ObjectStore) (limits quota.Limits, named bool, refusal *reconcile.StepError) {
	var def, most quota.Limits
	if q := store.Spec.Guardrails.Quota; q != nil {
		def, most = limitsOf(q.Default), limitsOf(q.Max)
		named = q.Default != nil || q.Max != nil
	}
	want := def
	if q := sb.Spec.Quota; q != nil {
		named = true
		if q.MaxSize != nil && q.MaxSize.Sign() <= 0 {
			return quota.Limits{}, true, reconcile.Terminalf(bkv1.ReasonQuotaNotAllowed, "spec.quota.maxSize %s must be at least one byte", q.MaxSize.String())
		}
		if q.MaxSize != nil && q.MaxSize.Cmp(maxQuotaSize) > 0 {
			// Past int64 a quantity's value is lost (1e30 reads as 0, no limit): refused,
			// so a claim never gets another quota than the one it reads.
			return quota.Limits{}, true, reconcile.Terminalf(bkv1.ReasonQuotaNotAllowed, "spec.quota.maxSize %s is above %s, the most a quota may say", q.MaxSize.String(), maxQuotaSize.String())
		}
		want = limitsOf(q)
		for _, l := range []struct {
			field     string
			ask, most int64
		}{{"maxSize", want.MaxBytes, most.MaxBytes}, {"maxObjects", want.MaxObjects, most.MaxObjects}} {
			if l.most > 0 && l.ask > l.most {
				return quota.Limits{}, true, reconcile.Terminalf(bkv1.ReasonQuotaNotAllowed, "spec.quota.%s %d is above ObjectStore %q's guardrails.quota.max (%d)",
					l.field, l.ask, store.Name, l.most)
			}
		}
	}
	return capped(want, most), named, nil
}

// capped applies the store's max to a quota: a limit the max sets and the quota leaves
// out, or exceeds (a default above the max), becomes the max's.
func capped(l, most quota.Limits) quota.Limits {
	if most.MaxBytes > 0 && (l.MaxBytes == 0 || l.MaxBytes > most.MaxBytes) {
		l.MaxBytes = most.MaxBytes
	}
	if most.MaxObjects > 0 && (l.MaxObjects == 0 || l.MaxObjects > most.MaxObjects) {
		l.MaxObjects = most.MaxObjects
	}
	return l
}

// maxQuotaSize is the largest size a quota may say (1 EiB): far above any bucket, and
// safely inside int64, past which a quantity's value is lost silently.
var maxQuotaSize = resource.MustParse("1Ei")

// limitsOf reads an API quota; sizes round up to whole bytes, and a size above
// maxQuotaSize (the store admin's; a claim's is refused first) counts as that.
func limitsOf(q *bkv1.BucketQuota) quota.Limits {
	var l quota.Limits
	if q == nil {
		return l
	}
	switch {
	case q.MaxSize == nil || q.MaxSize.Sign() <= 0:
	case q.MaxSize.Cmp(maxQuotaSize) > 0:
		l.MaxBytes = maxQuotaSize.Value()
	default:
		l.MaxBytes = q.MaxSize.Value()
	}
	if q.MaxObjects != nil && *q.MaxObjects > 0 {
		l.MaxObjects = *q.MaxObjects
	}
	return l
}

// quotaPlan is what the configuration step does with the bucket's quota.
type quotaPlan struct {
	want  quota.Limits
	named bool
	// client is the store's admin API; err says why there is none (a NotImplemented
	// *s3.Error for a store without spec.adminAPI).
	client quota.Client
	err    error
}

// quotaSettings is the quota as a setting of the configuration step: set when the claim
// or its store names one, removed when the operator set one that nothing names any
// more (or, on a bucket this claim created, found one nobody asked for), and not
// touched otherwise. A store without an admin API cannot have had a quota set by the
// operator, so nothing is read there unless a quota is asked for.
func quotaSettings(p quotaPlan, managed managedConfig) []setting {
	remove := !p.named && (managed.exclusive || managed.applied.Quota)
	if !p.named && (!remove || p.err != nil) {
		// Nothing asked, and nothing to remove, or no admin API to remove it with: a
		// claim that names no quota never fails for the store's admin API (the store's
		// AdminAPIReady condition tells the platform team).
		return nil
	}
	out := []setting{{name: "quota", apply: quotaSetting(p),
		record: func(a *bkv1.AppliedConfiguration) { a.Quota = p.named && !managed.exclusive }}}
	if p.client != nil {
		// What the store cannot enforce (SeaweedFS: an object count) is reported as
		// unsupported, by name, and the rest of the quota still applies.
		if enforceable, missing := p.client.Enforceable(p.want); missing != "" {
			out[0].apply = quotaSetting(quotaPlan{want: enforceable, named: p.named, client: p.client})
			out = append(out, setting{name: missing, apply: func(context.Context, s3.Client, string) (bool, error) {
				return false, &s3.Error{Op: "SetBucketQuota", Kind: s3.KindNotImplemented}
			}})
		}
	}
	return out
}

func quotaSetting(p quotaPlan) func(context.Context, s3.Client, string) (bool, error) {
	return func(ctx context.Context, _ s3.Client, bucket string) (bool, error) {
		if p.err != nil {
			return false, p.err
		}
		have, err := p.client.BucketQuota(ctx, bucket)
		if err != nil || have == p.want {
			return false, err
		}
		return true, p.client.SetBucketQuota(ctx, bucket, p.want)
	}
}
