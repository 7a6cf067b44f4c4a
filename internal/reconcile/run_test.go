package reconcile

import (
	"context"
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// steps records which of a Lifecycle's steps a pass took, and with what it saw.
type steps struct {
	taken        []string
	gone         []types.NamespacedName
	writes       []string
	sawFinalizer bool
}

func (s *steps) lifecycle(normal func(*bkv1.StorageBucket)) Lifecycle[*bkv1.StorageBucket] {
	step := func(name string) func(context.Context, *bkv1.StorageBucket, *StatusPatcher) (ctrl.Result, error) {
		return func(_ context.Context, sb *bkv1.StorageBucket, _ *StatusPatcher) (ctrl.Result, error) {
			s.taken = append(s.taken, name)
			s.sawFinalizer = slices.Contains(sb.Finalizers, bkv1.Finalizer)
			if name == "normal" && normal != nil {
				normal(sb)
			}
			return ctrl.Result{}, nil
		}
	}
	return Lifecycle[*bkv1.StorageBucket]{
		Kind:      "StorageBucket",
		Status:    sbStatus,
		OnWrite:   func(kind string) { s.writes = append(s.writes, kind) },
		Gone:      func(n types.NamespacedName) { s.gone = append(s.gone, n) },
		Deleting:  step("deleting"),
		Suspended: func(sb *bkv1.StorageBucket) bool { return sb.Spec.Suspend },
		Suspend:   step("suspend"),
		Normal:    step("normal"),
	}
}

func request(name string) ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "tenant", Name: name}}
}

// TestRunOnAnObjectGone: nothing to read means forget it and succeed, no step taken.
func TestRunOnAnObjectGone(t *testing.T) {
	c := newCountingClient(t)
	var s steps
	if _, err := Run(context.Background(), c, request("none"), &bkv1.StorageBucket{}, s.lifecycle(nil)); err != nil {
		t.Fatal(err)
	}
	if len(s.taken) != 0 || len(s.gone) != 1 || s.gone[0].Name != "none" {
		t.Errorf("steps %v, gone %v; want only Gone(tenant/none)", s.taken, s.gone)
	}
}

// TestRunAddsTheFinalizerFirst: the finalizer is on the server before the normal step
// runs (nothing can be created outside the cluster without it), and a pass that changes
// no status writes none.
func TestRunAddsTheFinalizerFirst(t *testing.T) {
	c := newCountingClient(t, claim("new"))
	var s steps
	if _, err := Run(context.Background(), c, request("new"), &bkv1.StorageBucket{}, s.lifecycle(nil)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.taken, []string{"normal"}) || !s.sawFinalizer {
		t.Errorf("steps %v, normal saw the finalizer: %v", s.taken, s.sawFinalizer)
	}
	if got := fetch(t, c, "new"); !slices.Contains(got.Finalizers, bkv1.Finalizer) {
		t.Errorf("server finalizers %v", got.Finalizers)
	}
	if c.patches != 1 || c.statusPatches != 0 || len(s.writes) != 0 {
		t.Errorf("%d patches, %d status patches, writes %v; want the finalizer's patch only", c.patches, c.statusPatches, s.writes)
	}
	// The next pass finds the finalizer and patches nothing at all.
	if _, err := Run(context.Background(), c, request("new"), &bkv1.StorageBucket{}, s.lifecycle(nil)); err != nil {
		t.Fatal(err)
	}
	if c.patches != 1 || c.statusPatches != 0 {
		t.Errorf("a settled pass sent %d patches, %d status patches", c.patches-1, c.statusPatches)
	}
}

// TestRunWritesTheStatusOnceAtTheEnd: what the normal step sets is written by the
// deferred patch, once, and counted under the kind.
func TestRunWritesTheStatusOnceAtTheEnd(t *testing.T) {
	c := newCountingClient(t, claim("ready"))
	var s steps
	normal := func(sb *bkv1.StorageBucket) {
		SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionTrue, "Provisioned", "")
		sb.Status.BucketName = "tenant-ready"
	}
	if _, err := Run(context.Background(), c, request("ready"), &bkv1.StorageBucket{}, s.lifecycle(normal)); err != nil {
		t.Fatal(err)
	}
	got := fetch(t, c, "ready")
	if c.statusPatches != 1 || !slices.Equal(s.writes, []string{"StorageBucket"}) || got.Status.BucketName != "tenant-ready" {
		t.Errorf("%d status patches, writes %v, server bucket name %q", c.statusPatches, s.writes, got.Status.BucketName)
	}
}

// TestRunTakesTheDeletingOrSuspendStep: an object being deleted goes to Deleting (and
// gets no finalizer added back), a suspended one to Suspend.
func TestRunTakesTheDeletingOrSuspendStep(t *testing.T) {
	ctx := context.Background()
	deleting := claim("deleting")
	deleting.Finalizers = []string{"example.com/hold"}
	suspended := claim("suspended")
	suspended.Spec.Suspend = true
	c := newCountingClient(t, deleting, suspended)
	if err := c.Delete(ctx, fetch(t, c, "deleting")); err != nil {
		t.Fatal(err)
	}
	var s steps
	if _, err := Run(ctx, c, request("deleting"), &bkv1.StorageBucket{}, s.lifecycle(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, c, request("suspended"), &bkv1.StorageBucket{}, s.lifecycle(nil)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.taken, []string{"deleting", "suspend"}) {
		t.Errorf("steps %v, want deleting then suspend", s.taken)
	}
	if got := fetch(t, c, "deleting"); slices.Contains(got.Finalizers, bkv1.Finalizer) {
		t.Errorf("a deleting object got the finalizer: %v", got.Finalizers)
	}
}

// TestRunRetriesAConflictingStatusWriteSoon: a status write refused for a stale copy
// becomes a prompt requeue, not an error with backoff; a step's own error wins over
// the write's.
func TestRunRetriesAConflictingStatusWriteSoon(t *testing.T) {
	ctx := context.Background()
	c := newCountingClient(t, claim("raced"))
	var s steps
	// The normal step sees a copy another writer then moves past.
	normal := func(sb *bkv1.StorageBucket) {
		other := fetch(t, c, "raced")
		other.Labels = map[string]string{"moved": "on"}
		if err := c.Update(ctx, other); err != nil {
			t.Fatal(err)
		}
		SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionTrue, "Provisioned", "")
	}
	res, err := Run(ctx, c, request("raced"), &bkv1.StorageBucket{}, s.lifecycle(normal))
	if err != nil || res.RequeueAfter != ConflictRetryDelay {
		t.Errorf("conflicting write: %+v, %v; want a requeue after %s", res, err, ConflictRetryDelay)
	}
	if len(s.writes) != 0 {
		t.Errorf("a refused write was counted: %v", s.writes)
	}

	boom := errors.New("store down")
	l := s.lifecycle(normal)
	l.Normal = func(_ context.Context, sb *bkv1.StorageBucket, _ *StatusPatcher) (ctrl.Result, error) {
		normal(sb)
		return ctrl.Result{}, boom
	}
	if _, err := Run(ctx, c, request("raced"), &bkv1.StorageBucket{}, l); !errors.Is(err, boom) {
		t.Errorf("the step's error was replaced: %v", err)
	}
}
