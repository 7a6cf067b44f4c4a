package storagebucket

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
)

// TestMoveTargetName: the name a move of claim team-a/data, whose bucket is named
// "invoices" (outside every lane), takes on a target with prefix "acme", by the claim's
// choice, the retirement's, and the target's guardrails.legacyBucketNames.
func TestMoveTargetName(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}).Build()}
	lane := naming.BucketName("acme", "team-a", "data")
	listed := func(s *bkv1.ObjectStore) {
		s.Spec.Guardrails.LegacyBucketNames = []bkv1.LegacyBucketNames{{Names: []string{"invoices"}, Namespaces: []string{"team-a"}}}
	}
	for _, c := range []struct {
		name       string
		choice     bkv1.MoveBucketName // spec.move.bucketName
		retirement bkv1.MoveBucketName // spec.retire.bucketName of a retirement moving it ("-": none)
		store      func(*bkv1.ObjectStore)
		recorded   string // status.move.targetBucket
		want       string // the name picked; "" refused
		hint       string // what a refusal says to do
	}{
		{name: "unset: Keep, refused", retirement: "-", want: "", hint: "spec.move.bucketName: Lane"},
		{name: "Keep, refused", choice: bkv1.MoveBucketNameKeep, retirement: "-", hint: "guardrails.legacyBucketNames"},
		{name: "Lane", choice: bkv1.MoveBucketNameLane, retirement: "-", want: lane},
		{name: "Lane, the name listed: kept", choice: bkv1.MoveBucketNameLane, retirement: "-", store: listed, want: "invoices"},
		{name: "Keep, the name listed", choice: bkv1.MoveBucketNameKeep, retirement: "-", store: listed, want: "invoices"},
		{name: "the retirement's Lane", retirement: bkv1.MoveBucketNameLane, want: lane},
		{name: "the claim's Keep wins over the retirement's Lane", choice: bkv1.MoveBucketNameKeep, retirement: bkv1.MoveBucketNameLane},
		{name: "a retirement without a choice", hint: "spec.retire.bucketName"},
		{name: "the recorded target stays, though the choice changed", choice: bkv1.MoveBucketNameKeep, retirement: "-", recorded: lane, want: lane},
		{name: "a recorded target the target refuses", choice: bkv1.MoveBucketNameLane, retirement: "-", recorded: "acme-team-b-x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "data", UID: "1111"}}
			sb.Spec.BucketName, sb.Status.BucketName = "invoices", "invoices"
			if c.choice != "" {
				sb.Spec.Move = &bkv1.MoveSpec{BucketName: c.choice}
			}
			store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "target"}, Spec: bkv1.ObjectStoreSpec{BucketNamePrefix: "acme"}}
			if c.store != nil {
				c.store(store)
			}
			there := &bucketScope{sb: sb, store: store, bucket: "invoices"}
			if c.retirement != "-" {
				there.dest = destination{store: "target", retirement: &bkv1.ClaimRetirement{From: "old", Into: "target"}, bucketName: c.retirement}
			}
			refusal, err := r.checkMoveTargetName(context.Background(), there, &bkv1.MoveStatus{TargetBucket: c.recorded})
			switch {
			case err != nil:
				t.Fatal(err)
			case c.want != "" && refusal != nil:
				t.Fatalf("refused: %s", refusal.Message)
			case c.want != "" && there.bucket != c.want:
				t.Errorf("the move takes the name %q, want %q", there.bucket, c.want)
			case c.want == "" && (refusal == nil || refusal.Reason != bkv1.ReasonBucketNameNotAllowed):
				t.Fatalf("refusal %v (name %q), want BucketNameNotAllowed", refusal, there.bucket)
			case c.want == "" && !strings.Contains(refusal.Message, c.hint):
				t.Errorf("the refusal %q does not say %q", refusal.Message, c.hint)
			}
		})
	}
}

// TestLegacyNameKeptOnItsHome: a claim holding a listed legacy name passes the
// guardrails of the store it moved to, on every pass after; one whose name the list
// drops is stalled; a claim that would create the name is refused.
func TestLegacyNameKeptOnItsHome(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}).Build()}
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "new"}, Spec: bkv1.ObjectStoreSpec{BucketNamePrefix: "acme"}}
	store.Spec.Guardrails.LegacyBucketNames = []bkv1.LegacyBucketNames{{Names: []string{"legacy-*"}, Namespaces: []string{"team-a"}}}
	check := func(sb *bkv1.StorageBucket, st *bkv1.ObjectStore) string {
		scope := &bucketScope{sb: sb, store: st, bucket: bucketNameFor(sb, st)}
		if refusal := checkGuardrails(scope); refusal != nil {
			return refusal.Reason
		}
		refusal, err := r.checkNameLane(context.Background(), scope)
		if err != nil {
			t.Fatal(err)
		}
		if refusal != nil {
			return refusal.Reason
		}
		return ""
	}
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "data", UID: "1111"}}
	sb.Spec.BucketName, sb.Status.BucketName = "legacy-invoices", "legacy-invoices"
	if got := check(sb, store); got != "" {
		t.Errorf("a held legacy name listed: refused %s", got)
	}
	fresh := sb.DeepCopy()
	fresh.Status.BucketName = ""
	if got := check(fresh, store); got != bkv1.ReasonBucketNameNotAllowed {
		t.Errorf("a new claim of a listed legacy name: %q, want BucketNameNotAllowed", got)
	}
	dropped := store.DeepCopy()
	dropped.Spec.Guardrails.LegacyBucketNames = nil
	if got := check(sb, dropped); got != bkv1.ReasonBucketNameNotAllowed {
		t.Errorf("a held legacy name no longer listed: %q, want BucketNameNotAllowed", got)
	}
	// Renamed by a move (Lane): the name in use is status.bucketName, in the lane.
	renamed := sb.DeepCopy()
	renamed.Status.BucketName = naming.BucketName("acme", "team-a", "data")
	if got := bucketNameFor(renamed, dropped); got != renamed.Status.BucketName {
		t.Errorf("bucketNameFor a renamed bucket = %q, want status.bucketName %q", got, renamed.Status.BucketName)
	}
	if got := check(renamed, dropped); got != "" {
		t.Errorf("a bucket renamed into the lane: refused %s", got)
	}
}

// TestLeftBehindRenamed: status.leftBehind names a copy by its store while it is named
// as the bucket is now, and by store/bucket once a move renamed the bucket.
func TestLeftBehindRenamed(t *testing.T) {
	// a → b keeping the name "n": a's copy is "a".
	list := leftBehindAfter(nil, "n", "a", "n", "b")
	if !slices.Equal(list, []string{"a"}) {
		t.Fatalf("after a → b: %v", list)
	}
	// b → c renaming to "l": at the cutover the list is written against "l".
	list = renameLeftBehind(list, "n", "l")
	list = leftBehindAfter(list, "l", "b", "n", "c")
	if !slices.Equal(list, []string{"a/n", "b/n"}) {
		t.Fatalf("after b → c renamed: %v", list)
	}
	for _, c := range leftBehindOn(list, "b", "l") {
		if c != (leftBehindCopy{"b", "n"}) {
			t.Errorf("the copy on b: %v", c)
		}
	}
	// c → a keeping "l": a holds "n", not the bucket's home name, so it stays listed.
	list = leftBehindAfter(list, "l", "c", "l", "a")
	if !slices.Equal(list, []string{"a/n", "b/n", "c"}) {
		t.Fatalf("after c → a: %v", list)
	}
	// back to b under "n"? Not possible without a rename; back to c: c's copy is home again.
	list = leftBehindAfter(list, "l", "a", "l", "c")
	if !slices.Equal(list, []string{"a/n", "b/n", "a"}) {
		t.Fatalf("after a → c: %v", list)
	}
	if got := withoutLeftBehind(list, "a", "n", "l"); !slices.Equal(got, []string{"b/n", "a"}) {
		t.Errorf("without a/n: %v", got)
	}
	if got := parseLeftBehind("a", "l"); got != (leftBehindCopy{"a", "l"}) {
		t.Errorf("parse a: %v", got)
	}
}
