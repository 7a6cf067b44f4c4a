package integration_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/quota"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestPacedQuotaOnSeaweedFS: SeaweedFS takes a claim's size quota through its S3 extension,
// reports the object limit it cannot enforce as NotSupportedByStore, and turns the
// bucket read-only at its next check once the bucket is over.
func TestPacedQuotaOnSeaweedFS(t *testing.T) {
	t.Parallel()
	f := newFixture(t, seaweed, withAdminAPI(t, seaweed))
	f.waitStoreCondition(bkv1.ConditionAdminAPIReady, metav1.ConditionTrue)
	sb := f.bucket("small", func(sb *bkv1.StorageBucket) {
		sb.Spec.Quota = &bkv1.BucketQuota{MaxSize: size("1"), MaxObjects: objects(3)}
		sb.Spec.Tags = map[string]string{"team": "data"}
	})
	got := f.waitCondition(sb, bkv1.ConditionConfigured, metav1.ConditionFalse, bkv1.ReasonNotSupportedByStore)
	if c := findCond(got, bkv1.ConditionConfigured); !strings.Contains(c.Message, "quota.maxObjects") {
		t.Errorf("Configured does not name the object limit: %s", c.Message)
	}
	bucket := got.Status.BucketName
	f.eventually(30*time.Second, "the size limit applied", func() error {
		if q := quotaOf(f, bucket); q != (quota.Limits{MaxBytes: 1}) {
			return errf("quota %v", q)
		}
		return nil
	})
	quotaTable.Set(t, seaweed.Kind, rowQuota, "size only, through its `?seaweedfs-quota` S3 extension (`adminAPI.type: SeaweedFS`); `maxObjects`: NotSupportedByStore")

	f.updateSpec(sb, func(s *bkv1.StorageBucketSpec) { s.Quota = &bkv1.BucketQuota{MaxSize: size("1")} })
	f.waitCondition(sb, bkv1.ConditionConfigured, metav1.ConditionTrue, bkv1.ReasonConfigApplied)

	// Over the quota: read-only at SeaweedFS's next check (once a minute).
	must(t, f.admin.PutObject(f.ctx, bucket, "over", make([]byte, 4096)))
	var refused *s3.Error
	f.eventually(3*time.Minute, "the bucket read-only", func() error {
		err := f.admin.PutObject(f.ctx, bucket, "more", []byte("x"))
		if err == nil {
			return errf("still writable")
		}
		if !errors.As(err, &refused) {
			return err
		}
		return nil
	})
	quotaTable.Set(t, seaweed.Kind, rowQuotaEnforce, fmt.Sprintf("the bucket turns read-only at SeaweedFS's next check, about once a minute: `%s` %d", refused.Code, refused.StatusCode))
	if u := f.get(sb).Status.Usage; u != nil {
		t.Errorf("status.usage from a store that reports none: %+v", u)
	}
	quotaTable.Set(t, seaweed.Kind, rowUsage, "no: its S3 extension reports none")
}

// TestIssuedKeysCannotChangeTheirQuota: the key a BucketAccess hands an application
// may not change its own bucket's quota through the store's quota API (RGW's admin
// API; SeaweedFS's S3 extension, which an identity with Admin on the bucket could use),
// so a tenant cannot lift the limit the platform team set. The quota stays as set.
func TestIssuedKeysCannotChangeTheirQuota(t *testing.T) {
	for _, srv := range []*testenv.S3Server{seaweed, rgw} {
		t.Run(string(srv.Kind), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, srv, withIAMOn(srv), withAdminAPI(t, srv))
			want := quota.Limits{MaxBytes: 1 << 20}
			sb := f.waitCondition(f.bucket("capped", func(sb *bkv1.StorageBucket) {
				sb.Spec.Quota = &bkv1.BucketQuota{MaxSize: size("1Mi")}
				sb.Spec.Access = "ReadWrite"
			}), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
			bucket := sb.Status.BucketName
			f.waitAccessReady(&bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: sb.Name}})
			secret := &corev1.Secret{}
			must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: sb.Name + "-access"}, secret))
			id, key := string(secret.Data[bkv1.AccessSecretKeyAccessKeyID]), string(secret.Data[bkv1.AccessSecretKeySecretKey])
			f.eventually(30*time.Second, "the issued key writing its bucket", func() error {
				return f.secretClient(sb.Name+"-access").c.PutObject(f.ctx, bucket, "mine", []byte("x"))
			})

			typ := bkv1.AdminAPISeaweedFS
			if srv.Kind == testenv.RGW {
				typ = bkv1.AdminAPIRGWAdminOps
			}
			tenant := quotaClient(t, srv, typ, id, key)
			for _, l := range []quota.Limits{{}, {MaxBytes: 1 << 40}} {
				if err := tenant.SetBucketQuota(f.ctx, bucket, l); s3.KindOf(err) != s3.KindAccessDenied {
					t.Errorf("the issued key set its bucket's quota to %v: %v, want AccessDenied", l, err)
				}
			}
			if got := quotaOf(f, bucket); got != want {
				t.Fatalf("the bucket's quota after the key's attempts: %v, want %v", got, want)
			}
		})
	}
}
