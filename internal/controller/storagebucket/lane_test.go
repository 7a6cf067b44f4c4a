package storagebucket

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// TestNameLane: which explicit names a claim of namespace "team-a" may create a bucket
// under, on a store with prefix "acme", with "team-a-b" existing beside it.
func TestNameLane(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	nsObj := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(nsObj("team-a", map[string]string{"adopt": "yes"}), nsObj("team-a-b", nil)).Build()}
	own := naming.BucketName("acme", "team-a", "data")

	for _, c := range []struct {
		name      string
		bucket    string
		mutate    func(*bkv1.StorageBucket, *bkv1.ObjectStore)
		refused   bool
		adoptOnly bool
	}{
		{name: "in the lane", bucket: "acme-team-a-logs"},
		{name: "own derived name", bucket: own},
		{name: "another namespace's lane", bucket: "acme-team-c-logs", refused: true},
		{name: "prefix only", bucket: "acme-logs", refused: true},
		{name: "derived shape", bucket: naming.BucketName("acme", "team-a", "other"), refused: true},
		{name: "a longer namespace's lane", bucket: "acme-team-a-b-logs", refused: true},
		{name: "a longer namespace that does not exist", bucket: "acme-team-a-c-logs"},
		{name: "guardrail allows it", bucket: "acme-team-c-logs",
			mutate: func(_ *bkv1.StorageBucket, s *bkv1.ObjectStore) {
				s.Spec.Guardrails.AllowBucketNamesOutsideNamespace = true
			}},
		{name: "any name allowed", bucket: "elsewhere",
			mutate: func(_ *bkv1.StorageBucket, s *bkv1.ObjectStore) { s.Spec.Guardrails.AllowAnyBucketName = true }},
		{name: "already held", bucket: "acme-team-c-logs",
			mutate: func(sb *bkv1.StorageBucket, _ *bkv1.ObjectStore) { sb.Status.BucketName = "acme-team-c-logs" }},
		{name: "create intent of another object", bucket: "acme-team-c-logs", refused: true,
			mutate: func(sb *bkv1.StorageBucket, _ *bkv1.ObjectStore) {
				sb.Status.CreateIntent = &bkv1.CreateIntent{BucketName: "acme-team-c-logs", UID: "another"}
			}},
		{name: "adoption asked for and allowed", bucket: "acme-team-c-logs", adoptOnly: true,
			mutate: func(sb *bkv1.StorageBucket, s *bkv1.ObjectStore) {
				sb.Spec.Adoption = bkv1.AdoptionIfUnowned
				s.Spec.Guardrails.AdoptionAllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"adopt": "yes"}}
			}},
		{name: "adoption asked for, namespace not selected", bucket: "acme-team-c-logs", refused: true,
			mutate: func(sb *bkv1.StorageBucket, s *bkv1.ObjectStore) {
				sb.Spec.Adoption = bkv1.AdoptionIfUnowned
				s.Spec.Guardrails.AdoptionAllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"adopt": "no"}}
			}},
		{name: "adoption allowed but not asked for", bucket: "acme-team-c-logs", refused: true,
			mutate: func(_ *bkv1.StorageBucket, s *bkv1.ObjectStore) {
				s.Spec.Guardrails.AdoptionAllowedNamespaces = &metav1.LabelSelector{}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "data", UID: "1111"},
				Spec: bkv1.StorageBucketSpec{BucketName: c.bucket}}
			store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "store"}, Spec: bkv1.ObjectStoreSpec{BucketNamePrefix: "acme"}}
			if c.mutate != nil {
				c.mutate(sb, store)
			}
			scope := &bucketScope{sb: sb, store: store, bucket: c.bucket}
			err := r.reconcileGuardrails(context.Background(), scope)
			var se *reconcile.StepError
			switch {
			case c.refused && (!errors.As(err, &se) || se.Reason != bkv1.ReasonBucketNameNotAllowed || !se.Terminal):
				t.Fatalf("err = %v, want a terminal BucketNameNotAllowed", err)
			case c.refused && !strings.Contains(se.Message, `"acme-team-a-"`):
				t.Errorf("the refusal does not say what the lane is: %s", se.Message)
			case !c.refused && err != nil:
				t.Fatalf("refused: %v", err)
			}
			if scope.adoptOnly != c.adoptOnly {
				t.Errorf("adoptOnly = %v, want %v", scope.adoptOnly, c.adoptOnly)
			}
		})
	}
}

// TestAdoptOnlyNameCreatesNothing: a name outside the lane that may only adopt is
// refused at the create, before the intent is recorded or anything is sent.
func TestAdoptOnlyNameCreatesNothing(t *testing.T) {
	sb := newSpecBucket()
	sb.Status.CreateIntent = nil
	f := &fakeS3{}
	scope := &bucketScope{sb: sb, s3: f, bucket: "acme-team-c-logs", adoptOnly: true}
	err := (&Reconciler{}).createBucket(context.Background(), scope)
	var se *reconcile.StepError
	if !errors.As(err, &se) || se.Reason != bkv1.ReasonBucketNameNotAllowed {
		t.Fatalf("err = %v, want BucketNameNotAllowed", err)
	}
	if sb.Status.CreateIntent != nil || len(f.writes)+len(f.reads) != 0 {
		t.Errorf("intent %v, store calls %v %v", sb.Status.CreateIntent, f.reads, f.writes)
	}
}

// TestMoveNameLane: which bucket names a claim of namespace "team-a" may move onto a
// store with prefix "acme", with "team-a-b" existing beside it. The name the bucket
// keeps decides, as for a new bucket there: holding it at the source, having meant to
// create it or being allowed to adopt it is no way past the target's lanes, and a
// name derived with another store's prefix is held to this one's.
func TestMoveNameLane(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"adopt": "yes"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a-b"}}).Build()}
	held := func(bucket string) func(*bkv1.StorageBucket, *bkv1.ObjectStore) {
		return func(sb *bkv1.StorageBucket, _ *bkv1.ObjectStore) { sb.Status.BucketName = bucket }
	}
	derived := func(prefix string) string { return naming.BucketName(prefix, "team-a", "data") }
	legacy := func(names []string, namespaces ...string) func(*bkv1.StorageBucket, *bkv1.ObjectStore) {
		return func(_ *bkv1.StorageBucket, s *bkv1.ObjectStore) {
			s.Spec.Guardrails.LegacyBucketNames = append(s.Spec.Guardrails.LegacyBucketNames, bkv1.LegacyBucketNames{Names: names, Namespaces: namespaces})
		}
	}

	for _, c := range []struct {
		name, bucket string
		// explicit: the bucket is spec.bucketName; otherwise it was derived at its
		// source (status.bucketName).
		explicit bool
		mutate   func(*bkv1.StorageBucket, *bkv1.ObjectStore)
		// want: what the refusal names ("" for none).
		want string
	}{
		{name: "in the lane", bucket: "acme-team-a-logs", explicit: true},
		{name: "the name the target derives", bucket: derived("acme")},
		{name: "another namespace's lane, held at the source", bucket: "acme-team-c-logs", explicit: true,
			mutate: held("acme-team-c-logs"), want: `"acme-team-a-"`},
		{name: "a longer namespace's lane, held at the source", bucket: "acme-team-a-b-logs", explicit: true,
			mutate: held("acme-team-a-b-logs"), want: `"acme-team-a-"`},
		{name: "another namespace's lane, a create intended", bucket: "acme-team-c-logs", explicit: true, want: `"acme-team-a-"`,
			mutate: func(sb *bkv1.StorageBucket, _ *bkv1.ObjectStore) {
				sb.Status.CreateIntent = &bkv1.CreateIntent{BucketName: "acme-team-c-logs", UID: sb.UID}
			}},
		{name: "another namespace's lane, adoption allowed", bucket: "acme-team-c-logs", explicit: true, want: `"acme-team-a-"`,
			mutate: func(sb *bkv1.StorageBucket, s *bkv1.ObjectStore) {
				sb.Status.BucketName = "acme-team-c-logs"
				sb.Spec.Adoption = bkv1.AdoptionIfUnowned
				s.Spec.Guardrails.AdoptionAllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"adopt": "yes"}}
			}},
		{name: "derived with no prefix", bucket: derived(""), want: "bucketNamePrefix"},
		{name: "derived with another prefix", bucket: derived("acme-old"), want: `"acme-team-a-"`},
		{name: "derived with another prefix, onto a store without one", bucket: derived("acme"), want: `"team-a-"`,
			mutate: func(_ *bkv1.StorageBucket, s *bkv1.ObjectStore) { s.Spec.BucketNamePrefix = "" }},
		{name: "outside the prefix, names outside lanes allowed", bucket: derived("other"), want: "bucketNamePrefix",
			mutate: func(_ *bkv1.StorageBucket, s *bkv1.ObjectStore) {
				s.Spec.Guardrails.AllowBucketNamesOutsideNamespace = true
			}},
		{name: "another namespace's lane, names outside lanes allowed", bucket: "acme-team-c-logs", explicit: true,
			mutate: func(_ *bkv1.StorageBucket, s *bkv1.ObjectStore) {
				s.Spec.Guardrails.AllowBucketNamesOutsideNamespace = true
			}},
		{name: "any name allowed", bucket: derived("other"),
			mutate: func(_ *bkv1.StorageBucket, s *bkv1.ObjectStore) { s.Spec.Guardrails.AllowAnyBucketName = true }},
		{name: "a legacy name listed for the namespace", bucket: "invoices", explicit: true, mutate: legacy([]string{"invoices"}, "team-a")},
		{name: "a legacy name under a listed pattern", bucket: "acme-old-reports", explicit: true, mutate: legacy([]string{"acme-old-*"}, "team-a")},
		{name: "a derived name of another prefix listed", bucket: derived("acme-old"), mutate: legacy([]string{derived("acme-old")}, "team-a")},
		{name: "a legacy name listed for another namespace", bucket: "invoices", explicit: true, want: "bucketNamePrefix", mutate: legacy([]string{"invoices"}, "team-c")},
		{name: "a legacy name not listed", bucket: "invoices-2", explicit: true, want: "bucketNamePrefix", mutate: legacy([]string{"invoices"}, "team-a")},
		{name: "a legacy name listed, not held by the claim", bucket: "invoices", explicit: true, want: "bucketNamePrefix",
			mutate: func(sb *bkv1.StorageBucket, s *bkv1.ObjectStore) {
				legacy([]string{"invoices"}, "team-a")(sb, s)
				sb.Status.BucketName = "" // a new claim: the list brings names along with moves only
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "data", UID: "1111"}}
			sb.Status.BucketName = c.bucket
			if c.explicit {
				sb.Spec.BucketName = c.bucket
			}
			store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "target"}, Spec: bkv1.ObjectStoreSpec{BucketNamePrefix: "acme"}}
			if c.mutate != nil {
				c.mutate(sb, store)
			}
			refusal, err := r.checkMoveName(context.Background(), &bucketScope{sb: sb, store: store, bucket: c.bucket})
			switch {
			case err != nil:
				t.Fatal(err)
			case c.want == "" && refusal != nil:
				t.Fatalf("refused: %s", refusal.Message)
			case c.want != "" && (refusal == nil || refusal.Reason != bkv1.ReasonBucketNameNotAllowed || !refusal.Terminal):
				t.Fatalf("refusal %v, want a terminal BucketNameNotAllowed", refusal)
			case c.want != "" && (!strings.Contains(refusal.Message, c.want) || !strings.Contains(refusal.Message, `"target"`)):
				t.Errorf("the refusal %q does not name the target's rule (%s)", refusal.Message, c.want)
			}
		})
	}
}
