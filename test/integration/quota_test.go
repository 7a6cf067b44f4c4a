package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/metrics"
	"github.com/bucketkeeper/bucketkeeper/internal/quota"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// withAdminAPI gives the fixture's store the admin API of srv's kind, signed by the
// identity the store admin would give it: RGW's admin-ops user, SeaweedFS's admin.
func withAdminAPI(t *testing.T, srv *testenv.S3Server) func(*bkv1.ObjectStore) {
	if srv.Kind == testenv.RGW {
		return withAdminAPIKeys(t, bkv1.AdminAPIRGWAdminOps, srv.AdminOpsAccessKeyID, srv.AdminOpsSecretAccessKey)
	}
	return withAdminAPIKeys(t, bkv1.AdminAPISeaweedFS, srv.AccessKeyID, srv.SecretAccessKey)
}

// withAdminAPIKeys gives the fixture's store an admin API of type typ, signed by the
// given key (a Secret of its own in the test's namespace).
func withAdminAPIKeys(t *testing.T, typ bkv1.AdminAPIType, access, secret string) func(*bkv1.ObjectStore) {
	return func(s *bkv1.ObjectStore) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		must(t, k8s.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Spec.CredentialsSecretRef.Namespace, Name: "admin-credentials"},
			StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: access, bkv1.CredentialsKeySecretAccessKey: secret},
		}))
		s.Spec.AdminAPI = &bkv1.AdminAPI{Type: typ,
			CredentialsSecretRef: bkv1.SecretReference{Namespace: s.Spec.CredentialsSecretRef.Namespace, Name: "admin-credentials"}}
	}
}

// quotaOf is a bucket's quota as the store enforces it, read with the admin identity.
func quotaOf(f *fixture, bucket string) quota.Limits {
	f.t.Helper()
	got, err := storeAdmin(f.t, f.server).BucketQuota(f.ctx, bucket)
	must(f.t, err)
	return got
}

// setQuota sets a bucket's quota by hand, as the store's admin would.
func setQuota(f *fixture, bucket string, l quota.Limits) {
	f.t.Helper()
	must(f.t, storeAdmin(f.t, f.server).SetBucketQuota(f.ctx, bucket, l))
}

// storeAdmin is the quota client of srv's store admin.
func storeAdmin(t *testing.T, srv *testenv.S3Server) quota.Client {
	t.Helper()
	if srv.Kind == testenv.RGW {
		return quotaClient(t, srv, bkv1.AdminAPIRGWAdminOps, srv.AdminOpsAccessKeyID, srv.AdminOpsSecretAccessKey)
	}
	return quotaClient(t, srv, bkv1.AdminAPISeaweedFS, srv.AccessKeyID, srv.SecretAccessKey)
}

func quotaClient(t *testing.T, srv *testenv.S3Server, typ bkv1.AdminAPIType, access, secret string) quota.Client {
	t.Helper()
	c, err := quota.New(quota.Config{Type: typ, Endpoint: srv.Endpoint, Region: srv.Region,
		AccessKeyID: access, SecretAccessKey: secret, RequestTimeout: 10 * time.Second})
	must(t, err)
	return c
}

func objects(n int64) *int64 { return &n }

func size(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// TestQuotaGuardrailsOnRGW: the platform team's default and max hold on Ceph RGW, the
// quota is enforced on write, drift is put back, and a claim asking more than the max
// is refused with nothing sent to the store.
func TestQuotaGuardrailsOnRGW(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rgw, withAdminAPI(t, rgw), func(s *bkv1.ObjectStore) {
		s.Spec.Guardrails.Quota = &bkv1.StoreQuota{
			Default: &bkv1.BucketQuota{MaxObjects: objects(5)},
			Max:     &bkv1.BucketQuota{MaxSize: size("1Mi"), MaxObjects: objects(10)},
		}
	})
	f.waitStoreCondition(bkv1.ConditionAdminAPIReady, metav1.ConditionTrue)

	// A claim's own quota, with the max's size filled in: a third object is refused.
	two := f.waitCondition(f.bucket("two", func(sb *bkv1.StorageBucket) { sb.Spec.Quota = &bkv1.BucketQuota{MaxObjects: objects(2)} }),
		bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := two.Status.BucketName
	if got, want := quotaOf(f, bucket), (quota.Limits{MaxBytes: 1 << 20, MaxObjects: 2}); got != want {
		t.Fatalf("quota on the store: %v, want %v", got, want)
	}
	if c := findCond(two, bkv1.ConditionConfigured); c == nil || !strings.Contains(c.Message, "quota") {
		t.Errorf("Configured does not mention the quota: %s", describe(two.Status.Conditions))
	}
	must(t, f.admin.PutObject(f.ctx, bucket, "a", []byte("a")))
	must(t, f.admin.PutObject(f.ctx, bucket, "b", []byte("b")))
	err := f.admin.PutObject(f.ctx, bucket, "c", []byte("c"))
	var refused *s3.Error
	if !errors.As(err, &refused) {
		t.Fatalf("a third object into a bucket whose claim allows two: %v", err)
	}
	quotaTable.Set(t, rgw.Kind, rowQuota, "yes, through its admin-ops API (`adminAPI.type: RGWAdminOps`)")
	quotaTable.Set(t, rgw.Kind, rowQuotaEnforce, fmt.Sprintf("refused on write: `%s` %d", refused.Code, refused.StatusCode))

	// A claim naming none gets the store's default, capped by the max.
	def := f.waitCondition(f.bucket("default"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	if got, want := quotaOf(f, def.Status.BucketName), (quota.Limits{MaxBytes: 1 << 20, MaxObjects: 5}); got != want {
		t.Fatalf("quota of a claim naming none: %v, want the store's default %v", got, want)
	}

	// Drift: a quota removed by hand is put back.
	setQuota(f, bucket, quota.Limits{})
	f.eventually(30*time.Second, "the quota put back", func() error {
		if got := quotaOf(f, bucket); got != (quota.Limits{MaxBytes: 1 << 20, MaxObjects: 2}) {
			return errf("quota %v", got)
		}
		return nil
	})

	// Above the max: refused, and nothing sent (no bucket made).
	before := requests.snapshot(f.store)
	greedy := f.bucket("greedy", func(sb *bkv1.StorageBucket) { sb.Spec.Quota = &bkv1.BucketQuota{MaxSize: size("2Mi")} })
	got := f.waitCondition(greedy, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonQuotaNotAllowed)
	if c := findCond(got, bkv1.ConditionReady); c == nil || !strings.Contains(c.Message, "guardrails.quota.max") {
		t.Errorf("refusal does not name the guardrail: %s", describe(got.Status.Conditions))
	}
	if _, mutating, ops := since(before, requests.snapshot(f.store)); mutating > 0 {
		t.Errorf("a refused claim sent %v", ops)
	}
	if got.Status.BucketName != "" {
		if _, err := f.admin.HeadBucket(f.ctx, got.Status.BucketName); s3.KindOf(err) != s3.KindNotFound {
			t.Errorf("the refused claim's bucket: %v, want none", err)
		}
	}
	// The claim that was allowed lowers its ask within the max: applied.
	f.updateSpec(two, func(s *bkv1.StorageBucketSpec) {
		s.Quota = &bkv1.BucketQuota{MaxSize: size("512Ki"), MaxObjects: objects(3)}
	})
	f.waitCondition(two, bkv1.ConditionConfigured, metav1.ConditionTrue, bkv1.ReasonConfigApplied)
	if got, want := quotaOf(f, bucket), (quota.Limits{MaxBytes: 512 << 10, MaxObjects: 3}); got != want {
		t.Fatalf("quota after the spec change: %v, want %v", got, want)
	}
}

// TestQuotaFollowsTheAbsentSettingsRule: on an adopted RGW bucket, a quota the operator
// never set is left alone; one it set and the spec drops is removed.
func TestQuotaFollowsTheAbsentSettingsRule(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rgw, allowAdoption, withAdminAPI(t, rgw))
	name := "legacy-" + f.ns
	must(t, f.admin.CreateBucket(f.ctx, name, ""))
	own := quota.Limits{MaxObjects: 7}
	setQuota(f, name, own)
	sb := f.waitCondition(f.bucket("legacy", func(sb *bkv1.StorageBucket) {
		sb.Spec.BucketName = name
		sb.Spec.Adoption = bkv1.AdoptionIfUnowned
	}), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	if got := quotaOf(f, name); got != own {
		t.Fatalf("adopted bucket's own quota: %v, want it kept (%v)", got, own)
	}

	f.updateSpec(sb, func(s *bkv1.StorageBucketSpec) { s.Quota = &bkv1.BucketQuota{MaxObjects: objects(3)} })
	got := f.waitCondition(sb, bkv1.ConditionConfigured, metav1.ConditionTrue, bkv1.ReasonConfigApplied)
	if q := quotaOf(f, name); q != (quota.Limits{MaxObjects: 3}) || got.Status.Applied == nil || !got.Status.Applied.Quota {
		t.Fatalf("spec quota on the adopted bucket: %v, applied %+v", q, got.Status.Applied)
	}

	f.updateSpec(sb, func(s *bkv1.StorageBucketSpec) { s.Quota = nil })
	got = f.waitCondition(sb, bkv1.ConditionConfigured, metav1.ConditionTrue, bkv1.ReasonConfigApplied)
	if q := quotaOf(f, name); !q.IsZero() || got.Status.Applied != nil && got.Status.Applied.Quota {
		t.Fatalf("after the spec dropped its quota: %v, applied %+v; want none", q, got.Status.Applied)
	}
}

// TestQuotaNotSupportedByStore: a store without an admin API (Versity has no quota
// API; a SeaweedFS store whose admin has not configured one) reports the quota as
// NotSupportedByStore and applies everything else.
func TestQuotaNotSupportedByStore(t *testing.T) {
	for _, server := range []*testenv.S3Server{versity, seaweed} {
		t.Run(string(server.Kind), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, server)
			sb := f.bucket("capped", func(sb *bkv1.StorageBucket) {
				sb.Spec.Quota = &bkv1.BucketQuota{MaxObjects: objects(2)}
				sb.Spec.Tags = map[string]string{"team": "data"}
			})
			got := f.waitCondition(sb, bkv1.ConditionConfigured, metav1.ConditionFalse, bkv1.ReasonNotSupportedByStore)
			if c := findCond(got, bkv1.ConditionConfigured); !strings.Contains(c.Message, "quota") {
				t.Errorf("Configured does not name the quota: %s", c.Message)
			}
			if c := findCond(got, bkv1.ConditionProvisioned); c == nil || c.Status != metav1.ConditionTrue {
				t.Fatalf("not provisioned: %s", describe(got.Status.Conditions))
			}
			f.eventually(30*time.Second, "the other settings applied", func() error {
				tags, err := f.admin.GetBucketTagging(f.ctx, got.Status.BucketName)
				if err != nil || tags["team"] != "data" {
					return errf("tags %v, %v", tags, err)
				}
				return nil
			})
			if u := f.get(sb).Status.Usage; u != nil {
				t.Errorf("status.usage on a store without an admin API: %+v", u)
			}
			if server.Kind == testenv.Versity {
				quotaTable.Set(t, server.Kind, rowQuota, "NotSupportedByStore: no quota API")
				quotaTable.Set(t, server.Kind, rowQuotaEnforce, "no quota")
				quotaTable.Set(t, server.Kind, rowUsage, "no: no admin API reports it")
			}
		})
	}
}

// TestAdminAPIReady: the store's AdminAPIReady says whether its admin API takes the
// operator's admin identity; an S3 identity (the account root) is refused there.
func TestAdminAPIReady(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rgw, withAdminAPIKeys(t, bkv1.AdminAPIRGWAdminOps, rgw.AccessKeyID, rgw.SecretAccessKey))
	f.waitStoreCondition(bkv1.ConditionAdminAPIReady, metav1.ConditionFalse)
	store := &bkv1.ObjectStore{}
	must(t, k8s.Get(f.ctx, objKey(&bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}}), store))
	if c := findStoreCond(store, bkv1.ConditionAdminAPIReady); c.Reason != bkv1.ReasonAccessDenied {
		t.Errorf("AdminAPIReady with the account root's key: %s/%s, want AccessDenied", c.Reason, c.Message)
	}
	if c := findStoreCond(store, bkv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("the store's Ready depends on its admin API: %s", describe(store.Status.Conditions))
	}
}

// TestPacedUsageFollowsWritesAndDeletes: on RGW, a bucket's usage reaches status and the
// usage and quota gauges with its probes, and follows writes and deletes.
func TestPacedUsageFollowsWritesAndDeletes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rgw, withAdminAPI(t, rgw))
	sb := f.waitCondition(f.bucket("used", probeEvery(time.Hour, bkv1.ProbeModeHead), func(sb *bkv1.StorageBucket) {
		sb.Spec.Quota = &bkv1.BucketQuota{MaxObjects: objects(5)}
	}), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := sb.Status.BucketName
	labels := map[string]string{"namespace": f.ns, "name": sb.Name}
	waitUsage := func(round string, bytes, count int64) {
		t.Helper()
		f.requestProbe(sb, round)
		f.eventually(60*time.Second, "usage "+round, func() error {
			u := f.get(sb).Status.Usage
			if u == nil || u.Bytes != bytes || u.Objects != count || u.Figure != bkv1.UsageLogical {
				return errf("status.usage %+v", u)
			}
			if v, ok := series(t, metrics.BucketUsageBytes, labels); !ok || v != float64(bytes) {
				return errf("usage bytes gauge %v (%v)", v, ok)
			}
			if v, ok := series(t, metrics.BucketUsageObjects, labels); !ok || v != float64(count) {
				return errf("usage objects gauge %v (%v)", v, ok)
			}
			return nil
		})
	}
	waitUsage("empty", 0, 0)
	if v, ok := series(t, metrics.BucketQuotaObjects, labels); !ok || v != 5 {
		t.Errorf("quota objects gauge %v (%v), want 5", v, ok)
	}
	if _, ok := series(t, metrics.BucketQuotaBytes, labels); ok {
		t.Error("a quota without a size limit has a size gauge")
	}
	must(t, f.admin.PutObject(f.ctx, bucket, "a", []byte("12345")))
	must(t, f.admin.PutObject(f.ctx, bucket, "b", []byte("123")))
	waitUsage("written", 8, 2)
	must(t, f.admin.DeleteObject(f.ctx, bucket, "a"))
	waitUsage("deleted", 3, 1)
	quotaTable.Set(t, rgw.Kind, rowUsage, "yes: logical bytes and objects from the admin-ops bucket stats, exact after each write and delete")

	// Gone with the bucket.
	must(t, k8s.Delete(f.ctx, sb))
	f.waitGone(sb)
	f.eventually(30*time.Second, "the usage series gone", func() error {
		if v, ok := series(t, metrics.BucketUsageObjects, labels); ok {
			return errf("still there: %v", v)
		}
		return nil
	})
}
