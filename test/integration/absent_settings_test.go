package integration_test

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/controller/storagebucket"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

func allowAdoption(s *bkv1.ObjectStore) {
	s.Spec.Guardrails.AdoptionAllowedNamespaces = &metav1.LabelSelector{}
}

// platformPolicy is a Deny a platform team puts on its buckets. On Versity it is the
// usual enforce-TLS Deny (every request without TLS). SeaweedFS evaluates
// aws:SecureTransport, and the test stores speak plain HTTP on loopback, so there that
// Deny would lock out every client, this test's admin included: there the policy
// protects the bucket from deletion instead, which the tests never ask for.
func platformPolicy(t *testing.T, kind testenv.S3Kind, bucket string) string {
	t.Helper()
	statement := map[string]any{
		"Sid": "EnforceTLS", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
		"Resource":  []string{"arn:aws:s3:::" + bucket, "arn:aws:s3:::" + bucket + "/*"},
		"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
	}
	if kind == testenv.SeaweedFS {
		statement = map[string]any{
			"Sid": "KeepBucket", "Effect": "Deny", "Principal": "*", "Action": "s3:DeleteBucket",
			"Resource": "arn:aws:s3:::" + bucket,
		}
	}
	raw, err := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{statement}})
	must(t, err)
	return string(raw)
}

// legacyBucket is a bucket made by hand before bucketkeeper: cost tags, a platform
// policy and, where the store has lifecycle, a rule of its own.
type legacyBucket struct {
	name   string
	tags   map[string]string
	policy string
	rules  []s3.LifecycleRule
}

func newLegacyBucket(t *testing.T, f *fixture, name string, lifecycle bool) legacyBucket {
	t.Helper()
	b := legacyBucket{name: name, tags: map[string]string{"cost-center": "cc-1", "owner": "finance"}, policy: platformPolicy(t, f.server.Kind, name)}
	must(t, f.admin.CreateBucket(f.ctx, name, ""))
	must(t, f.admin.PutBucketTagging(f.ctx, name, b.tags))
	if lifecycle {
		b.rules = []s3.LifecycleRule{{ID: "archive-logs", Prefix: "logs/", ExpirationDays: ptr32(90)}}
		must(t, f.admin.PutBucketLifecycle(f.ctx, name, b.rules))
	}
	must(t, f.admin.PutBucketPolicy(f.ctx, name, b.policy))
	return b
}

// storeState is a bucket's configuration as the store has it, read with the admin client.
type storeState struct {
	tags       map[string]string
	rules      []s3.LifecycleRule
	policy     string
	versioning s3.VersioningStatus
}

func (f *fixture) storeState(bucket string, lifecycle bool) storeState {
	f.t.Helper()
	var st storeState
	var err error
	st.tags, err = f.admin.GetBucketTagging(f.ctx, bucket)
	must(f.t, err)
	st.policy, err = f.admin.GetBucketPolicy(f.ctx, bucket)
	must(f.t, err)
	st.versioning, err = f.admin.GetBucketVersioning(f.ctx, bucket)
	must(f.t, err)
	if lifecycle {
		st.rules, err = f.admin.GetBucketLifecycle(f.ctx, bucket)
		must(f.t, err)
	}
	return st
}

// expectTags checks the bucket's tags are exactly want plus this claim's ownership tags.
func expectTags(t *testing.T, sb *bkv1.StorageBucket, got, want map[string]string) {
	t.Helper()
	want = maps.Clone(want)
	ns := &corev1.Namespace{}
	must(t, k8s.Get(context.Background(), client.ObjectKey{Name: sb.Namespace}, ns))
	want[bkv1.TagClaim], want[bkv1.TagUID], want[bkv1.TagCluster] = sb.Namespace+"/"+sb.Name, string(sb.UID)+"/"+string(ns.UID), clusterID
	if !maps.Equal(got, want) {
		t.Errorf("bucket tags = %v\nwant          %v", got, want)
	}
}

func expectPolicy(t *testing.T, got, want string) {
	t.Helper()
	if want == "" || got == "" {
		if got != want {
			t.Errorf("bucket policy = %q, want %q", got, want)
		}
		return
	}
	if same, err := s3.EquivalentPolicies(got, want); err != nil || !same {
		t.Errorf("bucket policy = %s\nwant %s (%v)", got, want, err)
	}
}

func expectRules(t *testing.T, got []s3.LifecycleRule, want ...s3.LifecycleRule) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("lifecycle rules = %+v\nwant %+v", got, want)
	}
}

// updateSpec changes a StorageBucket's spec, retrying on conflicts with status writes,
// and returns the new generation.
func (f *fixture) updateSpec(sb *bkv1.StorageBucket, mutate func(*bkv1.StorageBucketSpec)) int64 {
	f.t.Helper()
	cur := sb.DeepCopy()
	f.update(k8s, cur, func() { mutate(&cur.Spec) })
	return cur.Generation
}

// updateStore changes the fixture's ObjectStore spec, retrying on conflicts with the
// ObjectStore controller's status writes.
func (f *fixture) updateStore(mutate func(*bkv1.ObjectStoreSpec)) {
	f.t.Helper()
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}}
	f.update(k8s, store, func() { mutate(&store.Spec) })
}

// TestAdoptionKeepsForeignConfiguration: adopting a bucket keeps its policy, lifecycle
// rules and cost tags; spec tags are added and the ownership tags set. A spec naming a
// key the bucket had overrides it, and dropping what the spec applied removes exactly
// that, leaving what was found. A spec policy replaces the document, and dropping it
// deletes it.
func TestAdoptionKeepsForeignConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name      string
		server    **testenv.S3Server
		lifecycle bool // Versity has none
	}{{"SeaweedFS", &seaweed, true}, {"Versity", &versity, false}, {"RGW", &rgw, true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, *tc.server, allowAdoption)
			legacy := newLegacyBucket(t, f, "legacy-"+f.ns, tc.lifecycle)
			sb := f.bucket("legacy", func(sb *bkv1.StorageBucket) {
				sb.Spec.BucketName = legacy.name
				sb.Spec.Adoption = bkv1.AdoptionIfUnowned
				sb.Spec.Tags = map[string]string{"team": "data"}
			})
			got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
			// The adoption is announced once. (The Provisioned reason is not checked
			// here: TestPacedOwnershipMatrix does, and a pass whose status write conflicts
			// leaves it to the next pass, which finds the bucket already bound.)
			f.eventually(30*time.Second, "the BucketAdopted event", func() error {
				if ev := f.waitEvent(got, bkv1.ReasonBucketAdopted); ev[bkv1.ReasonBucketAdopted] != 1 {
					return errf("want one BucketAdopted event, got %v", ev)
				}
				return nil
			})
			st := f.storeState(legacy.name, tc.lifecycle)
			expectTags(t, got, st.tags, map[string]string{"cost-center": "cc-1", "owner": "finance", "team": "data"})
			expectPolicy(t, st.policy, legacy.policy)
			expectRules(t, st.rules, legacy.rules...)
			if a := got.Status.Applied; a == nil || !slices.Equal(a.TagKeys, []string{"team"}) || a.Policy || len(a.LifecycleRules) != 0 || a.Hash == "" {
				t.Errorf("status.applied = %+v, want the spec's tag key only, and a hash", a)
			}

			// The spec names a key the bucket had, and adds a rule of its own.
			tmp := bkv1.LifecycleRule{ID: "tmp", Prefix: "tmp/", ExpirationDays: ptr32(1)}
			f.updateSpec(sb, func(s *bkv1.StorageBucketSpec) {
				s.Tags = map[string]string{"team": "data", "cost-center": "cc-2"}
				if tc.lifecycle {
					s.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{tmp}}
				}
			})
			got = f.waitCondition(sb, bkv1.ConditionConfigured, metav1.ConditionTrue, bkv1.ReasonConfigApplied)
			st = f.storeState(legacy.name, tc.lifecycle)
			expectTags(t, got, st.tags, map[string]string{"cost-center": "cc-2", "owner": "finance", "team": "data"})
			expectPolicy(t, st.policy, legacy.policy)
			if tc.lifecycle {
				expectRules(t, st.rules, legacy.rules[0], s3.LifecycleRule{ID: "tmp", Prefix: "tmp/", ExpirationDays: ptr32(1)})
			}

			// Dropped from the spec: exactly what it applied goes.
			f.updateSpec(sb, func(s *bkv1.StorageBucketSpec) {
				s.Tags = map[string]string{"team": "data"}
				s.Lifecycle = nil
			})
			got = f.waitCondition(sb, bkv1.ConditionConfigured, metav1.ConditionTrue, bkv1.ReasonConfigApplied)
			st = f.storeState(legacy.name, tc.lifecycle)
			expectTags(t, got, st.tags, map[string]string{"owner": "finance", "team": "data"})
			expectPolicy(t, st.policy, legacy.policy)
			expectRules(t, st.rules, legacy.rules...)
			if a := got.Status.Applied; a == nil || !slices.Equal(a.TagKeys, []string{"team"}) || len(a.LifecycleRules) != 0 {
				t.Errorf("status.applied = %+v", a)
			}

			// A spec policy replaces the document; dropping it deletes the policy.
			specPolicy := policyJSON(t, legacy.name)
			f.updateSpec(sb, func(s *bkv1.StorageBucketSpec) { s.Policy = specPolicy })
			got = f.waitCondition(sb, bkv1.ConditionConfigured, metav1.ConditionTrue, bkv1.ReasonConfigApplied)
			expectPolicy(t, f.storeState(legacy.name, false).policy, string(specPolicy.Raw))
			if a := got.Status.Applied; a == nil || !a.Policy {
				t.Errorf("status.applied = %+v, want the policy recorded", a)
			}
			f.updateSpec(sb, func(s *bkv1.StorageBucketSpec) { s.Policy = nil })
			got = f.waitCondition(sb, bkv1.ConditionConfigured, metav1.ConditionTrue, bkv1.ReasonConfigApplied)
			st = f.storeState(legacy.name, tc.lifecycle)
			expectPolicy(t, st.policy, "")
			expectTags(t, got, st.tags, map[string]string{"owner": "finance", "team": "data"})
			expectRules(t, st.rules, legacy.rules...)
		})
	}
}

// handReconciler is a StorageBucket reconciler started afresh, as after a restart:
// nothing in memory, only what status says. It counts S3 calls per bucket and
// operation, HTTP requests per operation, and status writes per object.
type handReconciler struct {
	*storagebucket.Reconciler
	calls *bucketCalls

	mu           sync.Mutex
	requests     map[string]int
	statusWrites map[string]int
}

func newHandReconciler(t *testing.T, clk clock.PassiveClock, syncInterval time.Duration) *handReconciler {
	t.Helper()
	h := &handReconciler{calls: &bucketCalls{}, requests: map[string]int{}, statusWrites: map[string]int{}}
	wrapped := interceptor.NewClient(k8sWatch, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			h.mu.Lock()
			h.statusWrites[obj.GetName()]++
			h.mu.Unlock()
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	stores := countingStores(h.calls, func(op string) {
		h.mu.Lock()
		h.requests[op]++
		h.mu.Unlock()
	})
	h.Reconciler = &storagebucket.Reconciler{Client: wrapped, Recorder: events.NewFakeRecorder(100), Stores: stores,
		Clock: clk, SyncInterval: syncInterval, ClusterID: clusterID}
	return h
}

// countingStores is a store registry whose clients count their S3 calls per bucket and
// operation in calls, and pass every HTTP request's operation to observe.
func countingStores(calls *bucketCalls, observe func(op string)) *stores.Registry {
	factory := func(ctx context.Context, cfg s3.Config) (s3.Client, error) {
		c, err := s3.New(ctx, cfg)
		return countingClient{Client: c, calls: calls}, err
	}
	return &stores.Registry{Client: k8s, APIReader: k8s, Factory: factory,
		Observer: func(_, op string, _ int, _ error) { observe(op) }}
}

// reconcileUntilReady runs Reconcile until sb is Ready for its current generation.
func (h *handReconciler) reconcileUntilReady(f *fixture, sb *bkv1.StorageBucket) *bkv1.StorageBucket {
	f.t.Helper()
	var err error
	for range 10 {
		if _, err = h.Reconcile(f.ctx, ctrl.Request{NamespacedName: objKey(sb)}); err != nil {
			continue
		}
		got := f.get(sb)
		if c := findCond(got, bkv1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == got.Generation {
			return got
		}
	}
	f.t.Fatalf("%s not Ready after 10 reconciles (last error %v): %s", sb.Name, err, describe(f.get(sb).Status.Conditions))
	return nil
}

// snapshot returns and resets what was counted.
func (h *handReconciler) snapshot() (requests, statusWrites map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	requests, statusWrites = h.requests, h.statusWrites
	h.requests, h.statusWrites = map[string]int{}, map[string]int{}
	return requests, statusWrites
}

// bucketCalls counts S3 calls per bucket and operation.
type bucketCalls struct {
	mu     sync.Mutex
	counts map[string]map[string]int
}

func (b *bucketCalls) add(bucket, op string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.counts == nil {
		b.counts = map[string]map[string]int{}
	}
	if b.counts[bucket] == nil {
		b.counts[bucket] = map[string]int{}
	}
	b.counts[bucket][op]++
}

// take returns and resets the counts.
func (b *bucketCalls) take() map[string]map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.counts
	b.counts = nil
	if out == nil {
		out = map[string]map[string]int{}
	}
	return out
}

func isolated(sb *bkv1.StorageBucket) { sb.Labels = map[string]string{isolatedLabel: sb.Namespace} }

// TestAbsentSettingsRuleSurvivesRestart: the rule is decided from status, not memory. A
// reconciler started afresh after the record exists removes exactly what the operator
// applied and the spec dropped, on an adopted bucket and on one it created.
func TestAbsentSettingsRuleSurvivesRestart(t *testing.T) {
	f := newFixture(t, seaweed, allowAdoption)
	f.waitStoreCondition(bkv1.ConditionReady, metav1.ConditionTrue)
	legacy := newLegacyBucket(t, f, "restart-"+f.ns, true)
	tmp := bkv1.LifecycleRule{ID: "tmp", Prefix: "tmp/", ExpirationDays: ptr32(1)}
	adopted := f.bucket("adopted", isolated, func(sb *bkv1.StorageBucket) {
		sb.Spec.BucketName = legacy.name
		sb.Spec.Adoption = bkv1.AdoptionIfUnowned
		sb.Spec.Tags = map[string]string{"team": "data", "env": "prod"}
		sb.Spec.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{tmp}}
		sb.Spec.Versioning = bkv1.VersioningEnabled
	})
	created := f.bucket("created", isolated, func(sb *bkv1.StorageBucket) {
		sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete
		sb.Spec.Tags = map[string]string{"team": "data", "env": "prod"}
		sb.Spec.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{tmp}}
		sb.Spec.Policy = policyJSON(t, naming.BucketName("", f.ns, "created"))
	})
	first := newHandReconciler(t, clock.RealClock{}, time.Hour)
	got := first.reconcileUntilReady(f, adopted)
	if a := got.Status.Applied; a == nil || !slices.Equal(a.TagKeys, []string{"env", "team"}) || !slices.Equal(a.LifecycleRules, []string{"tmp"}) || !a.Versioning || a.Policy {
		t.Fatalf("status.applied = %+v", a)
	}
	st := f.storeState(legacy.name, true)
	expectTags(t, got, st.tags, map[string]string{"cost-center": "cc-1", "owner": "finance", "team": "data", "env": "prod"})
	expectRules(t, st.rules, legacy.rules[0], s3.LifecycleRule{ID: "tmp", Prefix: "tmp/", ExpirationDays: ptr32(1)})

	// With no operator running, the spec drops env, the rule and versioning.
	f.updateSpec(adopted, func(s *bkv1.StorageBucketSpec) {
		s.Tags = map[string]string{"team": "data"}
		s.Lifecycle = nil
		s.Versioning = ""
	})
	got = newHandReconciler(t, clock.RealClock{}, time.Hour).reconcileUntilReady(f, adopted)
	st = f.storeState(legacy.name, true)
	expectTags(t, got, st.tags, map[string]string{"cost-center": "cc-1", "owner": "finance", "team": "data"})
	expectRules(t, st.rules, legacy.rules...)
	expectPolicy(t, st.policy, legacy.policy)
	if st.versioning != s3.VersioningSuspended {
		t.Errorf("versioning = %q: the operator enabled it and the spec dropped it, want Suspended", st.versioning)
	}
	if a := got.Status.Applied; a == nil || !slices.Equal(a.TagKeys, []string{"team"}) || len(a.LifecycleRules) != 0 || a.Versioning {
		t.Errorf("status.applied = %+v", a)
	}

	// The created bucket: nothing on it is foreign, and a fresh reconciler knows it.
	got = first.reconcileUntilReady(f, created)
	bucket := got.Status.BucketName
	st = f.storeState(bucket, true)
	expectTags(t, got, st.tags, map[string]string{"team": "data", "env": "prod"})
	expectPolicy(t, st.policy, string(policyJSON(t, bucket).Raw))
	expectRules(t, st.rules, s3.LifecycleRule{ID: "tmp", Prefix: "tmp/", ExpirationDays: ptr32(1)})
	if a := got.Status.Applied; a == nil || len(a.TagKeys) != 0 || len(a.LifecycleRules) != 0 || a.Policy || a.Hash == "" {
		t.Errorf("status.applied of a created bucket = %+v, want only a hash", a)
	}
	f.updateSpec(created, func(s *bkv1.StorageBucketSpec) {
		s.Tags = map[string]string{"team": "data"}
		s.Lifecycle = nil
		s.Policy = nil
	})
	got = newHandReconciler(t, clock.RealClock{}, time.Hour).reconcileUntilReady(f, created)
	st = f.storeState(bucket, true)
	expectTags(t, got, st.tags, map[string]string{"team": "data"})
	expectPolicy(t, st.policy, "")
	expectRules(t, st.rules)

	// Only hand reconcilers see these objects: they carry out the deletions too.
	for _, sb := range []*bkv1.StorageBucket{adopted, created} {
		must(t, k8s.Delete(f.ctx, sb))
		r := newHandReconciler(t, clock.RealClock{}, time.Hour)
		for range 10 {
			_, _ = r.Reconcile(f.ctx, ctrl.Request{NamespacedName: objKey(sb)})
			cur := &bkv1.StorageBucket{}
			if err := k8s.Get(f.ctx, objKey(sb), cur); err != nil {
				break
			}
			// Every CreateBucket was answered, and status says so: a reconciler that
			// did not see them has no late create to wait for.
			if c := reconcile.FindCondition(cur.Status.Conditions, bkv1.ConditionReady); c != nil && c.Reason == bkv1.ReasonCreateUnanswered {
				t.Fatalf("%s: the deletion waits for a CreateBucket that was answered: %s", sb.Name, c.Message)
			}
		}
		f.waitGone(sb)
	}
}
