package e2e_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// heapGrowthBound is what floodSecrets hostile Secrets may add to the manager's live heap:
// the cache keeps each as a summary of at most a few kilobytes (TransformSecret), so the
// figure is under 1 MiB (1.2 MiB measured for twice as many); the bound leaves room for the
// informers' own bookkeeping and for whatever else this process allocates meanwhile.
// Keeping their data would cost 100 MiB, six times the bound.
const heapGrowthBound = 16 << 20

// floodSecrets is how many 1 MB Secrets the tenant labels. 100 MB is enough to tell a
// cache that keeps data from one that keeps summaries; every further megabyte only costs
// the API server, etcd and the informers CPU (500 of them took three minutes of make
// test, 200 of them 100 seconds).
const floodSecrets = 100

// TestLabelledSecretsDoNotGrowTheManager: a tenant with Secrets in its namespace labels
// floodSecrets of them, of 1 MB each, with every role the manager caches. The manager's
// live heap stays within heapGrowthBound, and it keeps serving buckets, whose credentials
// it now reads past the cache.
func TestLabelledSecretsDoNotGrowTheManager(t *testing.T) {
	mgr := startManager(t, cfg, operator.Options{})
	f := newFixture(t, "")
	f.waitCondition(f.bucket("before", nil), bkv1.ConditionReady, metav1.ConditionTrue, "", 2*time.Minute)
	tenant := asSecretWriter(t, f)

	roles := []string{bkv1.SecretRoleConnection, bkv1.SecretRoleCredentials, bkv1.SecretRoleAccess}
	selector := client.MatchingLabels{"test.bucketkeeper.io/flood": "true"}
	cached := func() (int, error) {
		list := &corev1.SecretList{}
		n := 0
		for _, role := range roles {
			if err := mgr.GetCache().List(f.ctx, list, client.InNamespace(f.ns), selector, client.MatchingLabels{bkv1.LabelSecretRole: role}); err != nil {
				return 0, err
			}
			n += len(list.Items)
		}
		return n, nil
	}
	before := liveHeap()

	const n, size = floodSecrets, 1_000_000 // a Secret's data may be at most 1 MiB in all
	payload := []byte(strings.Repeat("p", size))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			role := roles[i%len(roles)]
			s := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("flood-%03d", i),
					Labels: map[string]string{bkv1.LabelSecretRole: role, "test.bucketkeeper.io/flood": "true"}},
				// An access Secret's key pair is the one thing the cache may keep: make
				// it as large as the rest.
				Data: map[string][]byte{bkv1.AccessSecretKeyAccessKeyID: payload[:size/2], bkv1.AccessSecretKeySecretKey: payload[size/2:]},
			}
			errs <- tenant.Create(f.ctx, s)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	t.Cleanup(func() {
		_ = k8s.DeleteAllOf(f.ctx, &corev1.Secret{}, client.InNamespace(f.ns), selector)
	})
	f.eventually(2*time.Minute, "the manager's cache to hold every flood Secret", func() error {
		got, err := cached()
		if err != nil || got != n {
			return fmt.Errorf("%d cached, %v", got, err)
		}
		return nil
	})
	after := liveHeap()
	growth := int64(after) - int64(before)
	t.Logf("live heap %d MiB before, %d MiB after %d labelled 1 MB Secrets (growth %d KiB)", before>>20, after>>20, n, growth>>10)
	if growth > heapGrowthBound {
		t.Errorf("live heap grew by %d MiB, more than %d MiB", growth>>20, heapGrowthBound>>20)
	}
	// The manager still serves buckets: the store's credentials come from the API server.
	f.waitCondition(f.bucket("after", nil), bkv1.ConditionReady, metav1.ConditionTrue, "", 2*time.Minute)
}

// liveHeap is the heap in use after a full collection: what the process keeps.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// asSecretWriter returns a client that acts as a tenant allowed every verb on Secrets
// in its own namespace, and nothing else.
func asSecretWriter(t *testing.T, f *fixture) client.Client {
	t.Helper()
	c, err := testenv.ServiceAccountClient(f.ctx, k8s, cfg, operator.Scheme(), f.ns, "secret-writer", []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"secrets"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}}})
	must(t, err)
	f.eventually(30*time.Second, "the Secret writer's Role to take effect", func() error {
		return c.List(f.ctx, &corev1.SecretList{}, client.InNamespace(f.ns))
	})
	return c
}
