package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

func ptr32(v int32) *int32 { return &v }

func errf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func findCond(sb *bkv1.StorageBucket, typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(sb.Status.Conditions, typ)
}

// policyJSON is a bucket policy that denies deleting objects under a prefix: harmless
// for the tests, and a real document the store has to parse.
func policyJSON(t *testing.T, bucket string) *apiextensionsv1.JSON {
	t.Helper()
	return policyOf(t, map[string]any{
		"Sid": "DenyProtectedDeletes", "Effect": "Deny", "Principal": "*", "Action": "s3:DeleteObject",
		"Resource": "arn:aws:s3:::" + bucket + "/protected/*",
	})
}

// publicReadPolicy lets anyone read the bucket's objects.
func publicReadPolicy(t *testing.T, bucket string) *apiextensionsv1.JSON {
	t.Helper()
	return policyOf(t, map[string]any{
		"Sid": "PublicRead", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
		"Resource": "arn:aws:s3:::" + bucket + "/*",
	})
}

// policyOf is a bucket policy document of the given statements, as a spec holds it.
func policyOf(t *testing.T, statements ...map[string]any) *apiextensionsv1.JSON {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": statements})
	must(t, err)
	return &apiextensionsv1.JSON{Raw: raw}
}

func objKey(o client.Object) client.ObjectKey { return client.ObjectKeyFromObject(o) }

func findStoreCond(s *bkv1.ObjectStore, typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(s.Status.Conditions, typ)
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if sub != "" && strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func keysOf(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// table fetches the namespace's objects of resource as kubectl does (server-side
// printing), keyed by name then column name.
func (f *fixture) table(resource string) map[string]map[string]string {
	f.t.Helper()
	httpClient, err := rest.HTTPClientFor(cfg)
	must(f.t, err)
	url := fmt.Sprintf("%s/apis/bucketkeeper.io/v1alpha1/namespaces/%s/%s", strings.TrimSuffix(cfg.Host, "/"), f.ns, resource)
	req, err := http.NewRequestWithContext(f.ctx, http.MethodGet, url, nil)
	must(f.t, err)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := httpClient.Do(req)
	must(f.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(f.t, err)
	table := &metav1.Table{}
	if err := json.Unmarshal(body, table); err != nil {
		f.t.Fatalf("table of %s: %v: %.300s", resource, err, body)
	}
	out := map[string]map[string]string{}
	for _, row := range table.Rows {
		cells := map[string]string{}
		for i, col := range table.ColumnDefinitions {
			if i < len(row.Cells) {
				cells[col.Name] = fmt.Sprint(row.Cells[i])
			}
		}
		out[cells["Name"]] = cells
	}
	return out
}

// uidTagOf is what the uid tag of a bucket bound to sb says: "<claim UID>/<namespace
// UID>", with the namespace's UID as the API server has it.
func (f *fixture) uidTagOf(sb client.Object) string {
	f.t.Helper()
	ns := &corev1.Namespace{}
	must(f.t, k8s.Get(f.ctx, client.ObjectKey{Name: sb.GetNamespace()}, ns))
	return string(sb.GetUID()) + "/" + string(ns.UID)
}

// releasedUIDTag is the uid tag of a bucket retained from the fixture's namespace.
func (f *fixture) releasedUIDTag() string {
	f.t.Helper()
	ns := &corev1.Namespace{}
	must(f.t, k8s.Get(f.ctx, client.ObjectKey{Name: f.ns}, ns))
	return "/" + string(ns.UID)
}

// withIAMOn makes a fixture's store issue keys through srv's IAM endpoint (MinIO's
// admin API on MinIO).
func withIAMOn(srv *testenv.S3Server) func(*bkv1.ObjectStore) {
	return func(s *bkv1.ObjectStore) {
		s.Spec.AccessProvider = &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM}
		if srv.Kind == testenv.MinIO {
			s.Spec.AccessProvider.IAM = &bkv1.IAMAccessProvider{API: bkv1.IAMAPIMinIO}
		} else if srv.IAMEndpoint != srv.Endpoint {
			s.Spec.AccessProvider.IAM = &bkv1.IAMAccessProvider{Endpoint: srv.IAMEndpoint}
		}
	}
}

// longer gives the rest of the test timeout instead of the fixture's three minutes,
// for a test that waits out moves and a deletion's bound.
func (f *fixture) longer(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	f.t.Cleanup(cancel)
	f.ctx = ctx
}

// tenantNamespace makes a namespace besides the fixture's, for claims whose namespace
// a test deletes. Whatever the test leaves in it is deleted, and the namespace
// finalized, when the test ends.
func (f *fixture) tenantNamespace(prefix string) *corev1.Namespace {
	f.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	must(f.t, k8s.Create(f.ctx, ns))
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}); err != nil {
			return
		}
		list := &bkv1.StorageBucketList{}
		_ = k8s.List(ctx, list, client.InNamespace(ns.Name))
		for i := range list.Items {
			_ = k8s.Delete(ctx, &list.Items[i])
		}
		removeNamespace(f.t, ctx, ns.Name)
	})
	return ns
}

// bucketIn is f.bucket in another namespace than the fixture's.
func (f *fixture) bucketIn(namespace, name string, mutate ...func(*bkv1.StorageBucket)) *bkv1.StorageBucket {
	f.t.Helper()
	return f.bucket(name, append([]func(*bkv1.StorageBucket){func(sb *bkv1.StorageBucket) { sb.Namespace = namespace }}, mutate...)...)
}

// movesIndexed is a direct client that answers the move queue's lookup by the
// IndexStorageBucketMoving index, which the API server does not serve (the manager's
// cache does): for a test that drives a Reconciler of its own through a move.
type movesIndexed struct{ client.WithWatch }

func (c movesIndexed) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	sbs, ok := list.(*bkv1.StorageBucketList)
	if !ok || lo.FieldSelector == nil {
		return c.WithWatch.List(ctx, list, opts...)
	}
	want, ok := lo.FieldSelector.RequiresExactMatch(reconcile.IndexStorageBucketMoving)
	if !ok {
		return c.WithWatch.List(ctx, list, opts...)
	}
	all := &bkv1.StorageBucketList{}
	if err := c.WithWatch.List(ctx, all, &client.ListOptions{Namespace: lo.Namespace, LabelSelector: lo.LabelSelector}); err != nil {
		return err
	}
	sbs.Items = slices.DeleteFunc(all.Items, func(sb bkv1.StorageBucket) bool {
		return !slices.Contains(reconcile.MovingStores(&sb), want)
	})
	return nil
}
