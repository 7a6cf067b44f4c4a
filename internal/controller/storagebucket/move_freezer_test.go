package storagebucket

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// fakeEditor holds users' policies as a MinIO store would, and counts the writes.
type fakeEditor struct {
	policies map[string]string
	writes   int
	err      error // every read's answer, when set
}

func (f *fakeEditor) UserPolicy(_ context.Context, user string) (string, error) {
	return f.policies[user], f.err
}

func (f *fakeEditor) PutUserPolicyDocument(_ context.Context, user, doc string) error {
	if f.policies[user] != "" {
		f.policies[user] = doc
		f.writes++
	}
	return nil
}

// TestMinIOFreezerNarrowsTheIssuedKeys: on a store whose bucket policies bind no key,
// the freeze writes the Deny of the bucket's writes into the policy of every identity
// a BucketAccess naming the claim holds on that store (as the access controller
// renders it for a frozen claim, compared as policies), and into no other: not an
// access of another claim, nor one issued on another store; freezing again writes
// nothing, and the thaw gives every policy back as it was.
func TestMinIOFreezerNarrowsTheIssuedKeys(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = bkv1.AddToScheme(scheme)
	access := func(name, store string, buckets ...string) *bkv1.BucketAccess {
		ba := &bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
		for _, b := range buckets {
			ba.Spec.Buckets = append(ba.Spec.Buckets, bkv1.BucketGrant{Name: b, Mode: bkv1.AccessReadWrite})
		}
		ba.Status.ObjectStore, ba.Status.IdentityName = store, "user-"+name
		return ba
	}
	objs := []client.Object{
		access("app", "minio", "data"), access("both", "minio", "data", "other"),
		access("elsewhere", "seaweed", "data"), access("other", "minio", "other"),
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	grants := map[string][]iam.Grant{
		"user-app":       {{Bucket: "bk-data", Mode: iam.ReadWrite}},
		"user-both":      {{Bucket: "bk-data", Mode: iam.ReadWrite}, {Bucket: "bk-other", Mode: iam.ReadWrite}},
		"user-elsewhere": {{Bucket: "bk-data", Mode: iam.ReadWrite}},
		"user-other":     {{Bucket: "bk-other", Mode: iam.ReadWrite}},
	}
	render := func(user string, frozen bool) string {
		gs := append([]iam.Grant(nil), grants[user]...)
		for i := range gs {
			gs[i].Frozen = frozen && gs[i].Bucket == "bk-data"
		}
		doc, err := iam.MinIOPolicyDocument(gs)
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	editor := &fakeEditor{policies: map[string]string{}}
	for user := range grants {
		editor.policies[user] = render(user, false)
	}
	r := &Reconciler{Client: c, ClusterID: "c"}
	fz := minioFreezer{r: r, store: "minio", editor: editor}
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data"}}
	check := func(when string, frozen map[string]bool) {
		t.Helper()
		for user := range grants {
			if same, err := s3.EquivalentPolicies(editor.policies[user], render(user, frozen[user])); err != nil || !same {
				t.Errorf("%s: %s's policy %s, want it frozen %v (%v)", when, user, editor.policies[user], frozen[user], err)
			}
		}
	}
	if err := fz.freeze(context.Background(), sb, "bk-data"); err != nil {
		t.Fatal(err)
	}
	check("frozen", map[string]bool{"user-app": true, "user-both": true})
	writes := editor.writes
	if err := fz.freeze(context.Background(), sb, "bk-data"); err != nil || editor.writes != writes {
		t.Errorf("freezing again: %v, %d writes", err, editor.writes-writes)
	}
	if err := fz.thaw(context.Background(), sb, "bk-data"); err != nil {
		t.Fatal(err)
	}
	check("thawed", nil)
	// An identity without admin:GetPolicy stops the move with its reason, no retry loop.
	editor.err = &iam.Error{Op: "GetUserPolicy", Kind: iam.KindAccessDenied}
	err := fz.freeze(context.Background(), sb, "bk-data")
	if se := reconcile.AsStepError(err, "freezing"); err == nil || !se.Terminal || se.Reason != bkv1.ReasonAccessDenied || !strings.Contains(se.Message, "admin:GetPolicy") {
		t.Errorf("freezing without admin:GetPolicy: %+v", se)
	}
	if fz.unstopped() == "" {
		t.Error("the MinIO freezer names no key it does not stop")
	}
}
