package storagebucket

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/quota"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// measureUsage reads the bucket's usage from its store's admin API when the last read
// is at least the usage interval old, riding on a successful probe (no timer, no
// request of its own when the store has no admin API). Every measurement goes to the
// usage gauges; status.usage takes it only when it moved enough (usageWorthWriting), so
// a steady bucket costs no status write. It returns when usage was last read.
//
// The admin API's own failures are not the bucket's: they are logged and the figures
// kept, and the store's AdminAPIReady condition reports them.
func (r *Reconciler) measureUsage(ctx context.Context, scope *bucketScope, last, now time.Time) time.Time {
	p, sb := r.Prober, scope.sb
	if scope.store.Spec.AdminAPI == nil {
		return last
	}
	interval := p.UsageInterval
	if interval <= 0 {
		interval = defaults.UsageInterval
	}
	if !last.IsZero() && now.Sub(last) < interval {
		return last
	}
	c, err := r.Stores.QuotaClientFor(ctx, scope.store)
	if err == nil {
		var u quota.Usage
		if u, err = c.BucketUsage(ctx, scope.bucket); err == nil {
			if p.Usage != nil {
				limits, _, _ := desiredQuota(sb, scope.store)
				p.Usage(client.ObjectKeyFromObject(sb), u, limits)
			}
			if usageWorthWriting(sb.Status.Usage, u, now) {
				sb.Status.Usage = &bkv1.BucketUsage{Bytes: u.Bytes, Objects: u.Objects, MeasuredAt: metav1.NewTime(now), Figure: bkv1.UsageLogical}
			}
		}
	}
	if err != nil && s3.KindOf(err) != s3.KindNotImplemented { // a store that reports no usage
		log.FromContext(ctx).Info("reading the bucket's usage failed; the store's AdminAPIReady condition tells why", "error", err.Error())
	}
	return now
}

// usageWorthWriting says whether a measurement replaces status.usage: when a figure
// moved by 1% or more (any move from or to zero), or the recorded one is an hour old.
func usageWorthWriting(have *bkv1.BucketUsage, u quota.Usage, now time.Time) bool {
	if have == nil {
		return true
	}
	return moved(have.Bytes, u.Bytes) || moved(have.Objects, u.Objects) || now.Sub(have.MeasuredAt.Time) >= defaults.UsageRewrite
}

// moved: b differs from a by 1% of a or more, or one of them is zero and the other not.
func moved(a, b int64) bool {
	if a == b {
		return false
	}
	if a == 0 || b == 0 {
		return true
	}
	d := b - a
	if d < 0 {
		d = -d
	}
	return d >= a/100 // a under 100: any move is 1% or more
}
