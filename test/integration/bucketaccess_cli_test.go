package integration_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestAccessSecretAloneWithTheAWSCLI: the README's recipe, with the aws CLI users have
// and nothing but an access Secret as environment, on every store with IAM: an upload
// and a listing of the granted bucket in both of the README's forms, and a listing of a
// bucket the access was not granted refused AccessDenied by the store.
func TestAccessSecretAloneWithTheAWSCLI(t *testing.T) {
	for _, srv := range everyStore() {
		t.Run(string(srv.Kind), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, srv, withIAMOn(srv))
			f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
			granted := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
			other := f.waitCondition(f.bucket("other"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
			f.waitAccessReady(f.access("app", "app-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
			creds := &corev1.Secret{}
			must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "app-creds"}, creds))

			// Five runs of the CLI, a Python program that takes many seconds to start on a
			// loaded machine: the deadline bounds a hang, not the CLI's speed, and is not
			// the fixture's, which bounds the operator's work.
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			endpoint := string(creds.Data[bkv1.AccessSecretKeyEndpoint])
			if err := testenv.AWSCLIRecipe(ctx, t.TempDir(), creds.Data, endpoint, granted.Status.BucketName, other.Status.BucketName); err != nil {
				t.Errorf("aws CLI with the access Secret alone: %v", err)
			}
		})
	}
}
