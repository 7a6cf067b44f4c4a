package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// The suite's manager runs the access collector every collectInterval (see
// suite_test.go), so these tests wait for facts on the store, never for a time.

// TestAccessCollectorRevokesAnAccessDeletedWithoutItsFinalizer: a tenant strips the
// operator's finalizer from its BucketAccess and deletes it, so the controller never
// sees it go. The collector deletes the user all the same: the key is refused, the
// user is not listed, and the other tenant's key and data are untouched.
func TestAccessCollectorRevokesAnAccessDeletedWithoutItsFinalizer(t *testing.T) {
	for _, srv := range everyStore() {
		t.Run(string(srv.Kind), func(t *testing.T) {
			t.Parallel()
			testFinalizerStripped(t, srv)
		})
	}
}

func testFinalizerStripped(t *testing.T, srv *testenv.S3Server) {
	a, b := newFixture(t, srv, withIAMOn(srv)), newFixture(t, srv, withIAMOn(srv))
	a.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	b.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	bucketA := a.waitCondition(a.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	bucketB := b.waitCondition(b.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	baA := a.waitAccessReady(a.access("app", "app-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
	b.waitAccessReady(b.access("app", "app-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
	keyA, keyB := a.secretClient("app-creds"), b.secretClient("app-creds")
	must(t, keyA.c.PutObject(a.ctx, bucketA, "mine", []byte("a")))
	must(t, keyB.c.PutObject(b.ctx, bucketB, "theirs", []byte("b")))
	user := baA.Status.IdentityName

	tenant := tenantClient(t, a)
	stripFinalizerAndDelete(a, tenant, baA)

	a.waitKeyRefused(keyA, bucketA)
	a.eventually(30*time.Second, "user "+user+" gone from the store", func() error {
		if slices.Contains(allUserNames(t, srv), user) {
			return fmt.Errorf("still listed")
		}
		return nil
	})
	if body, err := keyB.c.GetObject(b.ctx, bucketB, "theirs", 100); err != nil || string(body) != "b" {
		t.Errorf("the other tenant's key or data changed: %q, %v", body, err)
	}
	must(t, keyB.c.PutObject(b.ctx, bucketB, "after", []byte("b")))
	a.waitNoOrphanUsers(srv)
}

// TestAccessCollectorRevokesOnTheStoreAnAccessLeft: an access re-pointed from a
// bucket on SeaweedFS to one on Versity gets a key there; its user on SeaweedFS,
// which the controller no longer looks at, is deleted by the collector.
func TestAccessCollectorRevokesOnTheStoreAnAccessLeft(t *testing.T) {
	t.Parallel()
	f := newFixture(t, seaweed, withIAMOn(seaweed))
	there := f.storeOn(versity, withIAMOn(versity))
	f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	here := f.waitCondition(f.bucket("here"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	away := f.waitCondition(f.bucket("away", func(sb *bkv1.StorageBucket) { sb.Spec.ObjectStoreRef.Name = there }),
		bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	ba := f.waitAccessReady(f.access("app", "app-creds", bkv1.BucketGrant{Name: "here"}))
	first := f.secretClient("app-creds")
	must(t, first.c.PutObject(f.ctx, here, "x", []byte("x")))

	f.update(k8s, ba, func() { ba.Spec.Buckets = []bkv1.BucketGrant{{Name: "away"}} })
	f.eventually(90*time.Second, "the access issued on "+there, func() error {
		got := &bkv1.BucketAccess{}
		must(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(ba), got))
		ready := apimeta.IsStatusConditionTrue(got.Status.Conditions, bkv1.ConditionReady)
		if !ready || got.Status.ObjectStore != there || got.Status.AccessKeyID == first.id {
			return fmt.Errorf("store %s key %s: %s", got.Status.ObjectStore, got.Status.AccessKeyID, describe(got.Status.Conditions))
		}
		return nil
	})
	second := f.secretClient("app-creds")
	f.eventually(30*time.Second, "the new key writes on "+there, func() error {
		return second.c.PutObject(f.ctx, away, "y", []byte("y"))
	})
	f.waitKeyRefused(first, here)
	f.eventually(30*time.Second, "the user gone from "+seaweed.Endpoint, func() error {
		if slices.Contains(allUserNames(t, seaweed), ba.Status.IdentityName) {
			return fmt.Errorf("still listed")
		}
		return nil
	})
	must(t, second.c.PutObject(f.ctx, away, "z", []byte("z")))
	f.waitNoOrphanUsers(seaweed)
	f.waitNoOrphanUsers(versity)
}

// TestAccessCollectorRevokesAKeyItsStatusNeverRecorded: the controller issued a key
// and wrote the Secret, but none of its status writes got through; then the
// StorageBucket is deleted. The controller finds no key in the status to revoke;
// the collector deletes the user.
func TestAccessCollectorRevokesAKeyItsStatusNeverRecorded(t *testing.T) {
	for _, srv := range everyStore() {
		t.Run(string(srv.Kind), func(t *testing.T) {
			t.Parallel()
			testStatusNeverWritten(t, srv)
		})
	}
}

func testStatusNeverWritten(t *testing.T, srv *testenv.S3Server) {
	f := newFixture(t, srv, withIAMOn(srv))
	f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	isolated := map[string]string{isolatedLabel: f.ns}
	sb := f.bucket("data", func(sb *bkv1.StorageBucket) { sb.Labels = isolated })
	ba := &bkv1.BucketAccess{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app", Labels: isolated},
		Spec:       bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{{Name: "data"}}, SecretName: "app-creds"},
	}
	must(t, k8s.Create(f.ctx, ba))
	t.Cleanup(func() { f.deleteIsolated(ba, sb) })

	// A manager of its own for these objects, whose BucketAccess status writes all fail.
	restCfg := rest.CopyConfig(cfg)
	restCfg.Wrap(func(next http.RoundTripper) http.RoundTripper { return accessStatusRefused{next: next} })
	ctx, stop := context.WithCancel(f.ctx)
	done, err := startManagerOn(ctx, restCfg, operator.Options{WatchLabelSelector: isolatedLabel + "=" + f.ns})
	must(t, err)
	defer func() { stop(); <-done }()

	var key secretKey
	f.eventually(90*time.Second, "a working key in the Secret", func() error {
		secret := &corev1.Secret{}
		if err := k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "app-creds"}, secret); err != nil {
			return err
		}
		key = f.secretClient("app-creds")
		return key.c.PutObject(f.ctx, f.get(sb).Status.BucketName, "x", []byte("x"))
	})
	got := &bkv1.BucketAccess{}
	must(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(ba), got))
	if got.Status.AccessKeyID != "" || got.Status.ObjectStore != "" {
		t.Fatalf("the status was written after all: %+v", got.Status)
	}
	bucket := f.get(sb).Status.BucketName
	must(t, k8s.Delete(f.ctx, sb))
	f.waitKeyRefused(key, bucket)
	user := iam.UserName(clusterID, string(got.UID))
	f.eventually(30*time.Second, "user "+user+" gone", func() error {
		if slices.Contains(allUserNames(t, srv), user) {
			return fmt.Errorf("still listed")
		}
		return nil
	})
	f.waitNoOrphanUsers(srv)
}

// accessStatusRefused fails every write of a BucketAccess's status, as an API server
// that keeps refusing it would.
type accessStatusRefused struct{ next http.RoundTripper }

func (a accessStatusRefused) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/bucketaccesses/") && strings.HasSuffix(req.URL.Path, "/status") {
		return nil, fmt.Errorf("status write refused by the test")
	}
	return a.next.RoundTrip(req)
}

// tenantClient acts as the namespace's tenant: a ServiceAccount with every verb on
// StorageBuckets, BucketAccesses (their finalizers included) and Secrets of its own
// namespace, and no status.
func tenantClient(t *testing.T, f *fixture) client.Client {
	t.Helper()
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	c, err := testenv.ServiceAccountClient(f.ctx, k8s, cfg, operator.Scheme(), f.ns, "key-tenant", []rbacv1.PolicyRule{
		{APIGroups: []string{bkv1.GroupVersion.Group}, Resources: []string{"storagebuckets", "bucketaccesses", "bucketaccesses/finalizers"}, Verbs: all},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: all},
	})
	must(t, err)
	return c
}

// stripFinalizerAndDelete removes every finalizer of ba and deletes it at exactly
// that version: if the operator put its finalizer back in between, the delete fails
// its precondition and the tenant tries again (as it does while the API server's
// authorizer has not yet learnt of the tenant's Role). So the access goes without the
// operator ever seeing a deletion.
func stripFinalizerAndDelete(f *fixture, tenant client.Client, ba *bkv1.BucketAccess) {
	f.t.Helper()
	f.eventually(30*time.Second, "access "+ba.Name+" deleted without its finalizer", func() error {
		got := &bkv1.BucketAccess{}
		if err := tenant.Get(f.ctx, client.ObjectKeyFromObject(ba), got); err != nil {
			return err
		}
		got.Finalizers = nil
		if err := tenant.Update(f.ctx, got); err != nil {
			return err
		}
		return tenant.Delete(f.ctx, got, client.Preconditions{UID: &got.UID, ResourceVersion: &got.ResourceVersion})
	})
	if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(ba), &bkv1.BucketAccess{}); !apierrors.IsNotFound(err) {
		f.t.Fatalf("the access is still there after its deletion: %v", err)
	}
}

// storeOn adds a second ObjectStore, on srv (with its own credentials), usable from the fixture's namespace.
func (f *fixture) storeOn(srv *testenv.S3Server, mutate ...func(*bkv1.ObjectStore)) string {
	f.t.Helper()
	return f.storeNamed(f.store+"-"+string(srv.Kind), srv, mutate...)
}

// storeNamed is storeOn with the store's name given.
func (f *fixture) storeNamed(name string, srv *testenv.S3Server, mutate ...func(*bkv1.ObjectStore)) string {
	f.t.Helper()
	must(f.t, k8s.Create(f.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: srv.AccessKeyID, bkv1.CredentialsKeySecretAccessKey: srv.SecretAccessKey},
	}))
	store := &bkv1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: bkv1.ObjectStoreSpec{Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
			CredentialsSecretRef: &bkv1.SecretReference{Namespace: f.ns, Name: name},
			HealthCheck:          bkv1.StoreHealthCheck{Interval: &metav1.Duration{Duration: 5 * time.Second}}},
	}
	for _, m := range mutate {
		m(store)
	}
	must(f.t, k8s.Create(f.ctx, store))
	// Registered after newFixture's cleanup, so it runs first: the buckets go before
	// the stores, whichever store they are on.
	f.t.Cleanup(func() {
		f.deleteStore()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = k8s.Delete(ctx, store)
	})
	return name
}

// waitKeyRefused waits until the store refuses a revoked key as a bad or
// unauthorised key (not merely any failure).
func (f *fixture) waitKeyRefused(k secretKey, bucket string) {
	f.t.Helper()
	f.eventually(30*time.Second, "key "+k.id+" refused", func() error {
		err := k.c.PutObject(f.ctx, bucket, "revoked", []byte("x"))
		if kind := s3.KindOf(err); kind == s3.KindAccessDenied || kind == s3.KindInvalidCredentials {
			return nil
		}
		return fmt.Errorf("key %s: %v", k.id, err)
	})
}

// waitNoOrphanUsers waits until every user of this cluster on srv belongs to a
// BucketAccess that exists (the collector deletes the others, of any test, within
// its interval).
func (f *fixture) waitNoOrphanUsers(srv *testenv.S3Server) {
	f.t.Helper()
	f.eventually(60*time.Second, "no orphaned user on "+string(srv.Kind), func() error {
		accesses := &bkv1.BucketAccessList{}
		if err := k8s.List(f.ctx, accesses); err != nil {
			return err
		}
		live := map[string]bool{}
		for _, ba := range accesses.Items {
			live[iam.UserName(clusterID, string(ba.UID))] = true
		}
		var orphans []string
		for _, u := range allUserNames(f.t, srv) {
			if iam.OwnedUserName(clusterID, u) && !live[u] {
				orphans = append(orphans, u)
			}
		}
		if len(orphans) > 0 {
			return fmt.Errorf("users of no live access: %v", orphans)
		}
		return nil
	})
}

// allUserNames lists every user on srv, all pages.
func allUserNames(t *testing.T, srv *testenv.S3Server) []string {
	t.Helper()
	d, err := iam.New(context.Background(), adminIAMConfig(srv))
	must(t, err)
	names, err := iam.ListUserNames(context.Background(), d)
	must(t, err)
	return names
}

// adminIAMConfig reaches srv's users as its admin: its IAM API, or MinIO's admin API.
func adminIAMConfig(srv *testenv.S3Server) iam.Config {
	if srv.Kind == testenv.MinIO {
		return iam.Config{API: iam.APIMinIO, Endpoint: srv.Endpoint, Region: srv.Region, AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey}
	}
	return iam.Config{Endpoint: srv.IAMEndpoint, Region: srv.IAMRegion, AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey}
}
