package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestHungStoreLeavesWorkersForOthers: store A accepts connections and never answers
// CreateBucket; more of its buckets wait than there are workers. A new bucket on store B
// must still become Ready, because A may hold only its share of the workers; B's bucket
// would otherwise wait for the S3 timeout of A's calls (longer than this test).
func TestHungStoreLeavesWorkersForOthers(t *testing.T) {
	const (
		concurrency = 4
		perStore    = 3 // the default for 4 workers: MaxReconcilesPerStore
		hungBuckets = concurrency + 2
	)
	proxy := newStallProxy(t, seaweed.Endpoint)
	hung := newFixture(t, seaweed, func(s *bkv1.ObjectStore) { s.Spec.Endpoint = proxy.URL })
	healthy := newFixture(t, seaweed)
	waitStore(hung, bkv1.ReasonReady)
	waitStore(healthy, bkv1.ReasonReady)
	proxy.stallWhen(isCreateBucket)

	// A manager of its own, whose S3 calls and reconciles would wait far longer than
	// the test: only the per-store cap can free a worker for store B.
	ctx, stop := context.WithCancel(context.Background())
	done, err := startManager(ctx, operator.Options{
		WatchLabelSelector: isolatedLabel + "=" + hung.ns,
		Concurrency:        concurrency,
		S3RequestTimeout:   10 * time.Minute,
		ReconcileTimeout:   10 * time.Minute,
	})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proxy.letGo()
		removeIsolated(t, hung, healthy)
		stop()
		<-done
	})

	isolated := func(sb *bkv1.StorageBucket) {
		sb.Labels = map[string]string{isolatedLabel: hung.ns}
		sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete
	}
	for i := range hungBuckets {
		hung.bucket(fmt.Sprintf("hung-%d", i), isolated)
	}
	hung.eventually(90*time.Second, fmt.Sprintf("%d CreateBucket requests held by the hung store", perStore), func() error {
		if now, buckets, _, _ := proxy.held(); now < perStore {
			return fmt.Errorf("%d held now (%v)", now, buckets)
		}
		return nil
	})

	sb := healthy.bucket("unaffected", isolated)
	start := time.Now()
	healthy.eventually(30*time.Second, "the healthy store's bucket to be Ready", func() error {
		got := &bkv1.StorageBucket{}
		if err := k8s.Get(healthy.ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		if c := findCond(got, bkv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != got.Generation {
			return fmt.Errorf("conditions: %s", describe(got.Status.Conditions))
		}
		return nil
	})
	now, buckets, most, total := proxy.held()
	t.Logf("Ready after %v while the hung store held %d requests (%v); at most %d at once, %d in all",
		time.Since(start).Round(time.Millisecond), now, buckets, most, total)
	if most > perStore {
		t.Errorf("the hung store held %d reconciles at once, more than its %d slots", most, perStore)
	}
	if now < perStore {
		t.Errorf("only %d requests still held: the store stopped hanging, so the test proved nothing", now)
	}
}

// TestStoreWithoutListPermissionIsReady: an identity that may not list buckets (AWS
// answers ListBuckets with AccessDenied when s3:ListAllMyBuckets is missing, reproduced
// here by the proxy) still has its signature verified, so the store is Ready and says
// why, and its buckets are provisioned.
func TestStoreWithoutListPermissionIsReady(t *testing.T) {
	proxy := newStallProxy(t, seaweed.Endpoint)
	proxy.denyWhen(isListBuckets)
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) { s.Spec.Endpoint = proxy.URL })
	store := waitStore(f, bkv1.ReasonReady)
	if c := findStoreCond(store, bkv1.ConditionReady); !strings.Contains(c.Message, "may not list buckets") {
		t.Errorf("Ready message does not say listing is not allowed: %q", c.Message)
	}
	if proxy.deniedCount() == 0 {
		t.Fatal("the health check never reached the refusal")
	}
	sb := f.bucket("least-privilege")
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
}

// TestBucketScopedIdentity: a real least-privilege identity (SeaweedFS's identity whose
// every permission is scoped to one bucket) makes a Ready store, and a StorageBucket
// adopting that bucket converges; the same key with a wrong secret is CredentialsInvalid.
func TestBucketScopedIdentity(t *testing.T) {
	if seaweed.ScopedAccessKeyID == "" {
		t.Fatal("the SeaweedFS harness has no bucket-scoped identity")
	}
	withCredentials := func(secretKey string) func(*bkv1.ObjectStore) {
		return func(s *bkv1.ObjectStore) {
			ref := &bkv1.SecretReference{Namespace: s.Spec.CredentialsSecretRef.Namespace, Name: "scoped-credentials"}
			must(t, k8s.Create(context.Background(), &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name},
				StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: seaweed.ScopedAccessKeyID, bkv1.CredentialsKeySecretAccessKey: secretKey},
			}))
			s.Spec.CredentialsSecretRef = ref
		}
	}

	wrong := newFixture(t, seaweed, withCredentials("wrong-"+seaweed.ScopedSecretAccessKey[6:]))
	waitStore(wrong, bkv1.ReasonCredentialsInvalid)

	// The admin made the bucket beforehand and lets this store's claims adopt it.
	f := newFixture(t, seaweed, withCredentials(seaweed.ScopedSecretAccessKey),
		func(s *bkv1.ObjectStore) { s.Spec.Guardrails.AdoptionAllowedNamespaces = &metav1.LabelSelector{} })
	if err := f.admin.CreateBucket(f.ctx, seaweed.ScopedBucket, ""); err != nil && s3.KindOf(err) != s3.KindAlreadyOwnedByYou {
		t.Fatalf("creating the scoped bucket as admin: %v", err)
	}
	before := requests.snapshot(f.store)
	waitStore(f, bkv1.ReasonReady)
	sb := f.bucket("scoped", func(sb *bkv1.StorageBucket) {
		sb.Spec.BucketName = seaweed.ScopedBucket
		sb.Spec.Adoption = bkv1.AdoptionIfUnowned
		sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete // so that a rerun starts from an unowned bucket
	})
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	if _, _, ops := since(before, requests.snapshot(f.store)); ops["CreateBucket"] != 0 {
		t.Errorf("the scoped identity tried to create a bucket: %v", ops)
	}
	tags, err := f.admin.GetBucketTagging(f.ctx, seaweed.ScopedBucket)
	must(t, err)
	if tags[bkv1.TagClaim] != f.ns+"/scoped" {
		t.Errorf("bucket tags %v do not name the claim", tags)
	}
	must(t, k8s.Delete(f.ctx, sb))
	f.waitGone(sb)
}

// waitStore waits until the fixture's store has Ready with reason and returns it.
func waitStore(f *fixture, reason string) *bkv1.ObjectStore {
	f.t.Helper()
	store := &bkv1.ObjectStore{}
	f.eventually(60*time.Second, "store reason "+reason, func() error {
		if err := k8s.Get(f.ctx, client.ObjectKey{Name: f.store}, store); err != nil {
			return err
		}
		if c := findStoreCond(store, bkv1.ConditionReady); c == nil || c.Reason != reason || c.ObservedGeneration != store.Generation {
			return fmt.Errorf("store conditions %v", store.Status.Conditions)
		}
		return nil
	})
	return store
}

// removeIsolated deletes the isolated StorageBuckets of the fixtures and waits (bounded,
// without failing a test that already failed) until the manager serving them has carried
// out their deletion, so none is left with a finalizer no one removes.
func removeIsolated(t *testing.T, fixtures ...*fixture) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, f := range fixtures {
		list := &bkv1.StorageBucketList{}
		_ = k8s.List(ctx, list, client.InNamespace(f.ns), client.HasLabels{isolatedLabel})
		for i := range list.Items {
			_ = k8s.Delete(ctx, &list.Items[i])
		}
	}
	for _, f := range fixtures {
		for {
			list := &bkv1.StorageBucketList{}
			if err := k8s.List(ctx, list, client.InNamespace(f.ns), client.HasLabels{isolatedLabel}); err != nil || len(list.Items) == 0 {
				break
			}
			select {
			case <-ctx.Done():
				t.Errorf("isolated StorageBuckets still there: %d in %s", len(list.Items), f.ns)
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}
