package storagebucket

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// publicRead is a public policy the operator set while the store allowed public buckets.
const publicRead = `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`

// withdrawPass runs one withdrawal of a provisioned, exclusive bucket whose store now
// allows no public buckets, after the claim was refused for reason.
func withdrawPass(t *testing.T, f *fakeS3, reason string) (*bkv1.StorageBucket, error) {
	t.Helper()
	sb := newSpecBucket()
	sb.Status.BucketName = "b"
	sb.Status.Applied = &bkv1.AppliedConfiguration{Policy: true}
	reconcile.SetCondition(&sb.Status.Conditions, 1, bkv1.ConditionProvisioned, metav1.ConditionTrue, bkv1.ReasonBucketCreated, "")
	scope := &bucketScope{sb: sb, s3: f, bucket: "b", store: &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "store"}},
		patcher: reconcile.NewStatusPatcher(nil, sb, func(sb *bkv1.StorageBucket) any { return sb.Status }, nil)}
	r := &Reconciler{Recorder: events.NewFakeRecorder(10)}
	return sb, r.withdrawForbidden(context.Background(), scope, reconcile.Terminalf(reason, "the guardrail's refusal"))
}

// TestWithdrawalTriesEveryStep: one call the store refuses does not stop the others.
// The policy goes first (a Deny in it is what refuses the public-access block); what
// the store refuses outright is the claim's terminal WithdrawalRefused naming the bucket
// and the calls; any other failure is retried, and the other steps still run.
func TestWithdrawalTriesEveryStep(t *testing.T) {
	denied := func(op string) error { return s3Err(op, s3.KindAccessDenied) }

	// The shield of a public policy, as far as the store honours it: the block is
	// refused, the policy delete is not. The policy goes; the block is retried now
	// that the Deny is gone, and goes on in the next pass.
	f := &fakeS3{policy: publicRead, errs: map[string]error{"PutPublicAccessBlock": denied("PutPublicAccessBlock")}}
	sb, err := withdrawPass(t, f, bkv1.ReasonPublicAccessNotAllowed)
	var se *reconcile.StepError
	if err == nil || errors.As(err, &se) {
		t.Fatalf("a pass that removed the policy and was refused the block: err = %v, want a plain error to retry", err)
	}
	if f.policy != "" || sb.Status.Applied.Policy {
		t.Errorf("the public policy is still on the bucket (%q) or recorded as the operator's", f.policy)
	}
	delete(f.errs, "PutPublicAccessBlock")
	if _, err := withdrawPass(t, f, bkv1.ReasonPublicAccessNotAllowed); err != nil || f.pab == nil || *f.pab != fullBlock {
		t.Errorf("second pass: err = %v, block = %+v; want the full block on", err, f.pab)
	}

	// Both refused: terminal, naming the bucket, both calls and what is left.
	f = &fakeS3{policy: publicRead, errs: map[string]error{"PutPublicAccessBlock": denied("PutPublicAccessBlock"), "DeleteBucketPolicy": denied("DeleteBucketPolicy")}}
	_, err = withdrawPass(t, f, bkv1.ReasonPublicAccessNotAllowed)
	if !errors.As(err, &se) || !se.Terminal || se.Reason != bkv1.ReasonWithdrawalRefused {
		t.Fatalf("err = %#v, want a terminal %s", err, bkv1.ReasonWithdrawalRefused)
	}
	for _, want := range []string{"the guardrail's refusal", `bucket "b"`, "DeleteBucketPolicy", "PutPublicAccessBlock", "the policy", `ObjectStore "store"'s admin`} {
		if !strings.Contains(se.Message, want) {
			t.Errorf("message %q does not say %s", se.Message, want)
		}
	}
	if !slices.Equal(f.writes, []string{"DeleteBucketPolicy", "PutPublicAccessBlock"}) {
		t.Errorf("writes = %v, want the policy delete, then the block", f.writes)
	}

	// A policy the operator may not even read is no policy the guardrails accept: it
	// is deleted all the same.
	f = &fakeS3{policy: publicRead, errs: map[string]error{"GetBucketPolicy": denied("GetBucketPolicy")}}
	if _, err := withdrawPass(t, f, bkv1.ReasonPolicyNotAllowed); err != nil || f.policy != "" {
		t.Errorf("unreadable policy: err = %v, policy %q; want it deleted", err, f.policy)
	}

	// Unreadable, and gone already by the time it is deleted: nothing to withdraw.
	f = &fakeS3{errs: map[string]error{"GetBucketPolicy": denied("GetBucketPolicy"), "DeleteBucketPolicy": s3Err("DeleteBucketPolicy", s3.KindNotFound)}}
	if _, err := withdrawPass(t, f, bkv1.ReasonPolicyNotAllowed); err != nil {
		t.Errorf("no policy to delete: err = %v, want none", err)
	}

	// The block fails for another reason: the policy still goes, and the pass is
	// retried, not stalled.
	f = &fakeS3{policy: publicRead, errs: map[string]error{"GetPublicAccessBlock": s3Err("GetPublicAccessBlock", s3.KindUnreachable)}}
	if _, err := withdrawPass(t, f, bkv1.ReasonPublicAccessNotAllowed); err == nil || errors.As(err, &se) || f.policy != "" {
		t.Errorf("unreachable block: err = %v, policy %q; want a retry with the policy gone", err, f.policy)
	}

	// A store without the block (Versity): nothing of it to remove.
	f = &fakeS3{policy: publicRead, errs: map[string]error{"GetPublicAccessBlock": notImplemented("GetPublicAccessBlock")}}
	if _, err := withdrawPass(t, f, bkv1.ReasonPublicAccessNotAllowed); err != nil || f.policy != "" {
		t.Errorf("no block on the store: err = %v, policy %q; want the policy gone and nothing else", err, f.policy)
	}

	// A policy that still passes stays.
	private := `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:user/app"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`
	f = &fakeS3{policy: private}
	if _, err := withdrawPass(t, f, bkv1.ReasonPolicyNotAllowed); err != nil || f.policy != private {
		t.Errorf("a passing policy: err = %v, policy %q; want it kept", err, f.policy)
	}
}
