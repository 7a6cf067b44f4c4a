package v1alpha1_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestNewObjectsAreInProgressUntilTheOperatorLooks: an object no operator has written
// a status for yet is InProgress to kstatus (and so to Flux's and Argo CD's health
// checks), never Current. kstatus counts an object without conditions and without
// status.observedGeneration as Current; the CRDs default status.observedGeneration to
// 0, which the API server fills in on every read, so a GitOps tool waiting for a claim
// waits for the operator's verdict on it.
func TestNewObjectsAreInProgressUntilTheOperatorLooks(t *testing.T) {
	ctx := testCtx(t)
	ns := newNamespace(t)
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: "local"}}}
	ba := &bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh"},
		Spec: bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{{Name: "fresh"}}, SecretName: "fresh-access"}}
	os := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: ns + "-fresh"}, Spec: bkv1.ObjectStoreSpec{Endpoint: "https://s3.example.com"}}
	t.Cleanup(func() { _ = k8s.Delete(ctx, os) })
	for _, o := range []client.Object{sb, ba, os} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(bkv1.GroupVersion.WithKind(kindOf(t, o)))
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatal(err)
		}
		res, err := status.Compute(got)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != status.InProgressStatus {
			t.Errorf("a new %s with no status written: kstatus %s (%s), want %s", got.GetKind(), res.Status, res.Message, status.InProgressStatus)
		}
	}
}

func kindOf(t *testing.T, o runtime.Object) string {
	t.Helper()
	gvks, _, err := k8s.Scheme().ObjectKinds(o)
	if err != nil || len(gvks) == 0 {
		t.Fatalf("no kind for %T: %v", o, err)
	}
	return gvks[0].Kind
}
