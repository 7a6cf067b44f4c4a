package storagebucket

import (
	"context"
	"errors"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// TestGuardrailsPassOnTheCheckedPolicy: what the configuration step sends is the policy
// as the guardrails checked it (canonical), never the spec's bytes; a refused policy
// leaves nothing to send.
func TestGuardrailsPassOnTheCheckedPolicy(t *testing.T) {
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "store"}}
	guard := func(policy string) (*bucketScope, error) {
		sb := newSpecBucket()
		sb.Spec.Policy = &apiextensionsv1.JSON{Raw: []byte(policy)}
		scope := &bucketScope{sb: sb, store: store, bucket: "b"}
		return scope, (&Reconciler{}).reconcileGuardrails(context.Background(), scope)
	}

	const spec = `{ "Statement": { "Resource": "arn:aws:s3:::b/*", "Action": "s3:GetObject", "Principal": {"AWS": "arn:aws:iam::123456789012:user/app"}, "Effect": "Allow" } }`
	const canonical = `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:user/app"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`
	scope, err := guard(spec)
	if err != nil {
		t.Fatal(err)
	}
	if scope.policy != canonical {
		t.Fatalf("scope.policy = %s, want %s", scope.policy, canonical)
	}
	f := &fakeS3{}
	for _, s := range desiredSettings(scope.sb, testOwner(scope.sb), managedConfigOf(scope.sb, "b"), scope.policy) {
		if _, err := s.apply(context.Background(), f, "b"); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	if f.policy != canonical {
		t.Errorf("the store got %s, want %s", f.policy, canonical)
	}

	for _, c := range []struct{ name, policy, reason, names string }{
		{"case twin", `{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/*"}],"statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`,
			bkv1.ReasonPolicyNotAllowed, `"statement"`},
		{"bucket action", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"a"},"Action":"s3:PutBucketTagging","Resource":"arn:aws:s3:::b"}]}`,
			bkv1.ReasonPolicyNotAllowed, `"s3:PutBucketTagging"`},
		{"public without allowPublicBuckets", `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`,
			bkv1.ReasonPublicAccessNotAllowed, "allowPublicBuckets"},
		{"RGW's anonymous user", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam:::user/anonymous"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`,
			bkv1.ReasonPublicAccessNotAllowed, `grants the principal {"AWS": "arn:aws:iam:::user/anonymous"}, an ARN with an empty account`},
		{"Deny of a configuration action", `{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:PutBucketPublicAccessBlock","Resource":"arn:aws:s3:::b"}]}`,
			bkv1.ReasonPolicyNotAllowed, `denies the action "s3:PutBucketPublicAccessBlock"`},
	} {
		scope, err := guard(c.policy)
		var se *reconcile.StepError
		if !errors.As(err, &se) || !se.Terminal || se.Reason != c.reason || !strings.Contains(se.Message, c.names) {
			t.Errorf("%s: err = %#v, want a terminal %s naming %s", c.name, err, c.reason, c.names)
		}
		if scope.policy != "" {
			t.Errorf("%s: a refused policy is passed on: %s", c.name, scope.policy)
		}
	}
}
