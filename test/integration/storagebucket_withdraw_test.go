package integration_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
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

// shieldStatement is the Deny a tenant could once pair with a public grant: it denies
// everyone, the operator included, what withdrawing the grant takes.
func shieldStatement(bucket string) map[string]any {
	return map[string]any{
		"Sid": "Shield", "Effect": "Deny", "Principal": "*",
		"Action":   []string{"s3:GetBucketPublicAccessBlock", "s3:PutBucketPublicAccessBlock", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy"},
		"Resource": "arn:aws:s3:::" + bucket,
	}
}

// TestDenyShieldIsWithdrawn: a tenant's public read, allowed while the store allowed
// public buckets, with a Deny of what its withdrawal takes (the public-access block,
// the policy's deletion). The shield is refused at once (PolicyNotAllowed), nothing
// written; applied by hand, as an operator before the rule would have applied it, it is
// withdrawn as a refused policy, and when the platform team turns public buckets off,
// every step of the withdrawal is tried whatever the store refuses. Ceph RGW lets the
// operator delete the policy: anonymous reads stop and the public-access block goes back
// on. SeaweedFS holds the operator to the Deny: the claim says so (WithdrawalRefused,
// naming the bucket and the calls refused), and so does an Event on the ObjectStore,
// for the store admin to remove it by hand. Either way the claim is deleted with Purge.
func TestDenyShieldIsWithdrawn(t *testing.T) {
	for _, server := range []*testenv.S3Server{seaweed, rgw} { // the stores with a public-access block
		t.Run(string(server.Kind), func(t *testing.T) { testDenyShieldIsWithdrawn(t, server) })
	}
}

func testDenyShieldIsWithdrawn(t *testing.T, server *testenv.S3Server) {
	f := newFixture(t, server, func(s *bkv1.ObjectStore) { s.Spec.Guardrails.AllowPublicBuckets = true })
	tenant := asTenant(t, f)
	bucket := f.ns + "-shield"
	read := map[string]any{"Sid": "PublicRead", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::" + bucket + "/*"}
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "shield"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, BucketName: bucket,
			PublicAccess: bkv1.PublicAccessAllowed, Policy: policyOf(t, read), DeletionPolicy: bkv1.DeletionPolicyPurge}}
	must(t, tenant.Create(f.ctx, sb))
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, "")
	must(t, f.admin.PutObject(f.ctx, bucket, "report.csv", []byte("tenant data")))
	if code, _ := anonymousGet(t, server, bucket, "report.csv"); code != http.StatusOK {
		t.Fatalf("the public read does not work on %s to begin with: anonymous GET = %d", server.Kind, code)
	}

	// The shield is refused before anything is sent.
	shield := policyOf(t, read, shieldStatement(bucket))
	before := requests.snapshot(f.store)
	latest := sb.DeepCopy()
	f.update(tenant, latest, func() { latest.Spec.Policy = shield })
	f.waitStalled(sb, bkv1.ReasonPolicyNotAllowed, `statement "Shield" denies the action "s3:GetBucketPublicAccessBlock"`)
	if _, mutating, ops := since(before, requests.snapshot(f.store)); mutating != 0 {
		t.Errorf("the refused shield wrote to the store: %v", ops)
	}
	f.assertStorePolicy(bucket, string(policyOf(t, read).Raw))

	// As an operator before the rule would have: the shield on the bucket.
	must(t, f.admin.PutBucketPolicy(f.ctx, bucket, string(shield.Raw)))
	f.updateStore(func(s *bkv1.ObjectStoreSpec) { s.Guardrails.AllowPublicBuckets = false })

	// Every step is tried; the policy goes first.
	if server.Kind == testenv.RGW {
		// RGW lets the bucket's owner delete its policy whatever it denies: withdrawn,
		// then the block goes back on.
		got := f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonPublicAccessNotAllowed)
		f.eventually(30*time.Second, "the policy withdrawn and the public-access block back on", func() error {
			policy, err := f.admin.GetBucketPolicy(f.ctx, bucket)
			if err != nil || policy != "" {
				return errf("policy %q (%v)", policy, err)
			}
			pab, err := f.admin.GetPublicAccessBlock(f.ctx, bucket)
			if err != nil || pab == nil || !pab.BlockPublicPolicy || !pab.RestrictPublicBuckets {
				return errf("public-access block %+v (%v)", pab, err)
			}
			return nil
		})
		if code, _ := anonymousGet(t, server, bucket, "report.csv"); code != http.StatusForbidden {
			t.Errorf("anonymous GET after the withdrawal = %d, want 403", code)
		}
		sb = got
	} else {
		// SeaweedFS holds the operator's credentials to the Deny: it refuses both the
		// policy's deletion and the block, and the claim says so, for the store admin.
		var got *bkv1.StorageBucket
		f.eventually(60*time.Second, "WithdrawalRefused once public buckets are off", func() error {
			got = f.get(sb)
			c := findCond(got, bkv1.ConditionStalled)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != bkv1.ReasonWithdrawalRefused || !strings.Contains(c.Message, "allowPublicBuckets") {
				return errf("conditions: %s", describe(got.Status.Conditions))
			}
			return nil
		})
		msg := findCond(got, bkv1.ConditionStalled).Message
		t.Logf("%s: %s", server.Kind, msg)
		for _, want := range []string{`bucket "` + bucket + `"`, "DeleteBucketPolicy", "GetPublicAccessBlock", "the policy and public access", "admin must remove them by hand", "allowPublicBuckets"} {
			if !strings.Contains(msg, want) {
				t.Errorf("WithdrawalRefused does not say %q: %s", want, msg)
			}
		}
		if c := findCond(got, bkv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != bkv1.ReasonWithdrawalRefused {
			t.Errorf("Ready = %+v, want False/%s", c, bkv1.ReasonWithdrawalRefused)
		}
		f.waitEvent(&bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}}, bkv1.ReasonWithdrawalRefused)
		sb = got
	}

	// Whatever the store let the operator do, the claim is deleted with Purge.
	must(t, tenant.Delete(f.ctx, sb))
	f.waitGone(sb)
	if _, err := f.admin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("bucket %s after the purge: %v, want it gone", bucket, err)
	}
}

// TestDataPlaneDenyDoesNotBlockPurge: the strictest Deny a tenant may still write,
// the data actions denied to everyone, is applied; the claim is then deleted with
// Purge, which the Deny would refuse where the store applies bucket policies to the
// operator's own credentials, and the bucket and its data are gone.
func TestDataPlaneDenyDoesNotBlockPurge(t *testing.T) {
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) {
			f := newFixture(t, server)
			tenant := asTenant(t, f)
			bucket := f.ns + "-sealed"
			sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "sealed"},
				Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, BucketName: bucket, DeletionPolicy: bkv1.DeletionPolicyPurge}}
			must(t, tenant.Create(f.ctx, sb))
			f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, "")
			for _, key := range []string{"a.csv", "protected/b.csv"} {
				must(t, f.admin.PutObject(f.ctx, bucket, key, []byte("tenant data")))
			}
			// What a purge lists and deletes with, and what an application reads and
			// writes with (every store knows these names; RGW knows no
			// s3:GetObjectAttributes).
			seal := policyOf(t, map[string]any{
				"Sid": "Sealed", "Effect": "Deny", "Principal": "*",
				"Action": []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion", "s3:AbortMultipartUpload",
					"s3:ListBucket", "s3:ListBucketVersions", "s3:ListBucketMultipartUploads"},
				"Resource": []string{"arn:aws:s3:::" + bucket, "arn:aws:s3:::" + bucket + "/*"},
			})
			latest := sb.DeepCopy()
			f.update(tenant, latest, func() { latest.Spec.Policy = seal })
			f.eventually(60*time.Second, "the seal on the bucket", func() error {
				have, err := f.admin.GetBucketPolicy(f.ctx, bucket)
				if same, _ := s3.EquivalentPolicies(have, canonicalPolicy(t, string(seal.Raw), bucket)); err != nil || !same {
					return errf("policy %q (%v); conditions: %s", have, err, describe(f.get(sb).Status.Conditions))
				}
				return nil
			})
			must(t, tenant.Delete(f.ctx, latest))
			f.waitGone(latest)
			if _, err := f.admin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
				t.Errorf("bucket %s after the purge: %v, want it gone", bucket, err)
			}
		})
	}
}
