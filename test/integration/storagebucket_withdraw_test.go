package integration_test

import (
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestSuspendDoesNotExemptFromGuardrails: a tenant's public bucket, allowed while the
// store allowed public buckets, is suspended; then the platform team turns public
// buckets off. The suspended claim is Stalled with the guardrail's reason, anonymous
// reads stop working and the operator's policy is gone from the bucket; the data stays.
func TestSuspendDoesNotExemptFromGuardrails(t *testing.T) {
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) {
			f := newFixture(t, server, func(s *bkv1.ObjectStore) { s.Spec.Guardrails.AllowPublicBuckets = true })
			bucket := f.ns + "-pub"
			sb := f.bucket("public", func(sb *bkv1.StorageBucket) {
				sb.Spec.BucketName = bucket
				sb.Spec.PublicAccess = bkv1.PublicAccessAllowed
				sb.Spec.Policy = publicReadPolicy(t, bucket)
				sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge
			})
			f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, "")
			data := []byte("tenant data")
			must(t, f.admin.PutObject(f.ctx, bucket, "report.csv", data))
			if code, _ := anonymousGet(t, server, bucket, "report.csv"); code != http.StatusOK {
				t.Fatalf("the public policy does not work on %s to begin with: anonymous GET = %d", server.Kind, code)
			}

			f.updateSpec(sb, func(s *bkv1.StorageBucketSpec) { s.Suspend = true })
			f.waitCondition(sb, bkv1.ConditionSuspended, metav1.ConditionTrue, bkv1.ReasonSuspended)
			f.updateStore(func(s *bkv1.ObjectStoreSpec) { s.Guardrails.AllowPublicBuckets = false })

			got := f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonPublicAccessNotAllowed)
			if c := findCond(got, bkv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != bkv1.ReasonPublicAccessNotAllowed {
				t.Errorf("Ready = %+v, want False/%s", c, bkv1.ReasonPublicAccessNotAllowed)
			}
			if c := findCond(got, bkv1.ConditionSuspended); c == nil || c.Status != metav1.ConditionTrue {
				t.Errorf("Suspended = %+v, want True", c)
			}
			f.eventually(30*time.Second, "anonymous reads refused", func() error {
				if code, _ := anonymousGet(t, server, bucket, "report.csv"); code == http.StatusOK {
					return errf("anonymous GET = %d", code)
				}
				return nil
			})
			if policy, err := f.admin.GetBucketPolicy(f.ctx, bucket); err != nil || policy != "" {
				t.Errorf("policy left on the bucket: %q, %v", policy, err)
			}
			if have, err := f.admin.GetObject(f.ctx, bucket, "report.csv", 1<<10); err != nil || string(have) != string(data) {
				t.Errorf("the tenant's object = %q, %v; want it unchanged", have, err)
			}
			f.waitEvent(sb, bkv1.ReasonPublicAccessNotAllowed)
		})
	}
}
