package invariants

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// The unit tests run the checker on a fake API server and fake stores: each plants one
// kind of breach in a state that is otherwise clean and expects exactly it. test/soak
// does the same on the real servers.

const (
	cluster = "unit-cluster"
	store   = "store-a"
	tenant  = "tenant-a"
)

// fakeS3 is a store's buckets, their tags and policies; only the calls the checker
// makes work.
type fakeS3 struct {
	s3.Client // nil: any other call panics
	buckets   map[string]map[string]string
	policies  map[string]string
	listErr   error
}

func (f *fakeS3) GetBucketPolicy(_ context.Context, bucket string) (string, error) {
	if _, ok := f.buckets[bucket]; !ok {
		return "", &s3.Error{Kind: s3.KindNotFound}
	}
	return f.policies[bucket], nil
}

func (f *fakeS3) ListBuckets(context.Context) ([]string, error) {
	if f.listErr != nil {
		return nil, f.listErr
	}
	return sortedKeys(f.buckets), nil
}

func (f *fakeS3) GetBucketTagging(_ context.Context, bucket string) (map[string]string, error) {
	tags, ok := f.buckets[bucket]
	if !ok {
		return nil, &s3.Error{Kind: s3.KindNotFound}
	}
	return tags, nil
}

// fakeIAM is a store's IAM users (keys and inline policies of each) and roles.
type fakeIAM struct {
	users map[string]*fakeUser
	roles []string
}

func (f *fakeIAM) Roles(context.Context) ([]string, error) { return f.roles, nil }

type fakeUser struct {
	keys     []string
	policies map[string]string
}

func (f *fakeIAM) Users(context.Context) ([]string, error) { return sortedKeys(f.users), nil }

func (f *fakeIAM) Keys(_ context.Context, user string) ([]string, error) {
	u := f.users[user]
	if u == nil {
		return nil, ErrNoSuchUser
	}
	return u.keys, nil
}

func (f *fakeIAM) Policies(_ context.Context, user string) (map[string]string, error) {
	u := f.users[user]
	if u == nil {
		return nil, ErrNoSuchUser
	}
	return u.policies, nil
}

// world is a clean state: a namespace, a store admitting it, a Ready claim with its
// bucket, and an access with its user, key, policy and Secrets. Tests break one thing.
type world struct {
	objects []client.Object
	s3      *fakeS3
	iam     *fakeIAM
	sb      *bkv1.StorageBucket
	ba      *bkv1.BucketAccess
	ns      *corev1.Namespace
	os      *bkv1.ObjectStore
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant, UID: "ns-uid", Labels: map[string]string{"tier": "gold"}}}
	os := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: store},
		Spec: bkv1.ObjectStoreSpec{AllowedNamespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}}}
	sb := &bkv1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "data", UID: "11111111-1111-1111-1111-111111111111", Finalizers: []string{bkv1.Finalizer}},
		Spec:       bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: store}},
		Status: bkv1.StorageBucketStatus{BucketName: "bk-tenant-a-data", ConnectionSecretName: "data-bucket",
			Conditions: []metav1.Condition{{Type: bkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: bkv1.ReasonReady, Message: "ok"}}},
	}
	ba := &bkv1.BucketAccess{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "app", UID: "22222222-2222-2222-2222-222222222222", Finalizers: []string{bkv1.Finalizer}},
		Spec:       bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{{Name: "data", Mode: bkv1.AccessReadOnly}}, SecretName: "app-key"},
		Status: bkv1.BucketAccessStatus{ObjectStore: store, AccessKeyID: "AKIACURRENT",
			Conditions: []metav1.Condition{{Type: bkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: bkv1.ReasonReady, Message: "ok"}}},
	}
	w := &world{sb: sb, ba: ba, ns: ns, os: os}
	doc, err := iam.PolicyDocument([]iam.Grant{{Bucket: sb.Status.BucketName, Mode: iam.ReadOnly}})
	if err != nil {
		t.Fatal(err)
	}
	w.s3 = &fakeS3{buckets: map[string]map[string]string{
		sb.Status.BucketName: {bkv1.TagCluster: cluster, bkv1.TagClaim: tenant + "/data", bkv1.TagUID: string(sb.UID) + "/ns-uid"},
		"someone-elses":      {"team": "x"},
		"other-cluster":      {bkv1.TagCluster: "other", bkv1.TagClaim: tenant + "/data", bkv1.TagUID: "33333333-3333-3333-3333-333333333333/ns-uid"},
		"released":           {bkv1.TagCluster: cluster, bkv1.TagClaim: tenant + "/old", bkv1.TagUID: "/ns-uid"},
	}}
	w.iam = &fakeIAM{users: map[string]*fakeUser{
		iam.UserName(cluster, string(ba.UID)): {keys: []string{"AKIACURRENT"}, policies: map[string]string{iam.PolicyName: doc}},
		"admin":                               {keys: []string{"AKIAADMIN"}, policies: map[string]string{"all": `{"Statement":{"Effect":"Allow","Action":"*","Resource":"*"}}`}},
		iam.UserName("other", "44444444-4444-4444-4444-444444444444"): {keys: []string{"AKIAOTHER"}},
	}}
	w.objects = []client.Object{ns, os, sb, ba,
		secret("data-bucket", bkv1.SecretRoleConnection, sb, "StorageBucket"),
		secret("app-key", bkv1.SecretRoleAccess, ba, "BucketAccess"),
		// The store admin's credentials Secret, labelled by the operator on first use.
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "creds",
			Labels: map[string]string{bkv1.LabelManagedBy: bkv1.LabelManagedByValue, bkv1.LabelSecretRole: bkv1.SecretRoleCredentials}}},
	}
	return w
}

func secret(name, role string, owner client.Object, kind string) *corev1.Secret {
	yes := true
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: owner.GetNamespace(), Name: name,
		Labels:          map[string]string{bkv1.LabelManagedBy: bkv1.LabelManagedByValue, bkv1.LabelSecretRole: role},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: bkv1.GroupVersion.String(), Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: &yes}},
	}}
}

// check runs the checker on the world as it is now.
func (w *world) check(t *testing.T) []Violation {
	t.Helper()
	return Check(context.Background(), fakeClient(w), viewsOf(w), cluster)
}

func fakeClient(w *world) client.Reader {
	return fake.NewClientBuilder().WithScheme(operator.Scheme()).WithObjects(w.objects...).Build()
}

func viewsOf(w *world) []StoreView { return []StoreView{{Name: store, S3: w.s3, IAM: w.iam}} }

// without drops the objects with the given UIDs or names.
func (w *world) without(keys ...string) {
	var kept []client.Object
	for _, o := range w.objects {
		drop := false
		for _, k := range keys {
			if string(o.GetUID()) == k || o.GetName() == k {
				drop = true
			}
		}
		if !drop {
			kept = append(kept, o)
		}
	}
	w.objects = kept
}

func deleting(o client.Object) {
	o.SetDeletionTimestamp(&metav1.Time{Time: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)})
}

// expectOnly fails unless got is exactly one violation of inv on object, whose
// finding contains every fragment.
func expectOnly(t *testing.T, got []Violation, inv Invariant, object string, fragments ...string) {
	t.Helper()
	if len(got) != 1 || got[0].Invariant != inv || got[0].Object != object {
		t.Fatalf("violations = %v, want exactly one %s of %s", got, inv, object)
	}
	for _, f := range fragments {
		if !strings.Contains(got[0].Found, f) {
			t.Errorf("finding %q does not say %q", got[0].Found, f)
		}
	}
}

func expectNone(t *testing.T, got []Violation) {
	t.Helper()
	if len(got) > 0 {
		t.Fatalf("violations on a clean state: %v", got)
	}
}

var errBoom = errors.New("boom")
