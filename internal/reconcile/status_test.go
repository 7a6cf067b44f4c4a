package reconcile

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestWriteNowOfAGoneObject: a record that must be on the server before the next step
// acts (the create intent) is not made on an object that is gone, and WriteNow says
// so: the API server may remove a claim whose finalizer it reported added, when a
// deletion raced the finalizer (kubernetes/kubernetes#77988), and a CreateBucket sent
// then would make a bucket no claim is left to delete. The deferred write of a pass
// still takes a gone object for one that needs no status.
func TestWriteNowOfAGoneObject(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = bkv1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&bkv1.StorageBucket{}).Build()
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "data", UID: "u", ResourceVersion: "7"}}
	p := NewStatusPatcher(c, sb, func(sb *bkv1.StorageBucket) any { return sb.Status }, nil)
	sb.Status.CreateIntent = &bkv1.CreateIntent{BucketName: "b", UID: sb.UID}
	if err := p.WriteNow(context.Background()); !apierrors.IsNotFound(err) {
		t.Fatalf("WriteNow on a gone object = %v, want NotFound", err)
	}
	if err := p.patch(context.Background()); err != nil {
		t.Fatalf("the deferred write on a gone object = %v, want nil", err)
	}
}
