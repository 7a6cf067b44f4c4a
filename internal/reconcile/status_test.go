package reconcile

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// countingClient is a fake API server that counts the status and metadata patches it
// is sent, so a test can say that a pass wrote nothing.
type countingClient struct {
	client.Client
	statusPatches, patches int
}

func newCountingClient(t *testing.T, objs ...client.Object) *countingClient {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := bkv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cc := &countingClient{}
	cc.Client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&bkv1.StorageBucket{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				cc.statusPatches++
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
				cc.patches++
				return c.Patch(ctx, obj, p, opts...)
			},
		}).Build()
	return cc
}

func claim(name string) *bkv1.StorageBucket {
	return &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name, Generation: 1}}
}

func sbStatus(sb *bkv1.StorageBucket) any { return sb.Status }

// fetch reads the object as the API server holds it.
func fetch(t *testing.T, c client.Client, name string) *bkv1.StorageBucket {
	t.Helper()
	got := &bkv1.StorageBucket{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "tenant", Name: name}, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestStatusPatcherSkipsAnUnchangedStatus: a pass that found everything in order, or
// changed only metadata or spec, sends no status write, counts none and announces
// nothing.
func TestStatusPatcherSkipsAnUnchangedStatus(t *testing.T) {
	ctx := context.Background()
	c := newCountingClient(t, claim("calm"))
	sb := fetch(t, c, "calm")
	writes, announced := 0, 0
	p := NewStatusPatcher(c, sb, sbStatus, func() { writes++ })
	p.AfterWrite(func() { announced++ })
	sb.Finalizers = append(sb.Finalizers, bkv1.Finalizer)
	sb.Spec.Tags = map[string]string{"team": "a"}
	if err := p.patch(ctx); err != nil {
		t.Fatal(err)
	}
	if c.statusPatches != 0 || writes != 0 || announced != 0 {
		t.Errorf("unchanged status: %d status patches, %d counted writes, %d announcements; want none", c.statusPatches, writes, announced)
	}
}

// TestStatusPatcherWritesAChangeOnce: a changed status is written once, counted once,
// and what was queued to announce it runs once, after the write.
func TestStatusPatcherWritesAChangeOnce(t *testing.T) {
	ctx := context.Background()
	c := newCountingClient(t, claim("changed"))
	sb := fetch(t, c, "changed")
	writes, announced := 0, 0
	p := NewStatusPatcher(c, sb, sbStatus, func() { writes++ })
	SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionTrue, "Provisioned", "the bucket exists")
	p.AfterWrite(func() {
		announced++
		if got := fetch(t, c, "changed"); !ConditionIsTrue(got.Status.Conditions, bkv1.ConditionReady) {
			t.Error("announced before the status was on the server")
		}
	})
	if err := p.patch(ctx); err != nil {
		t.Fatal(err)
	}
	if c.statusPatches != 1 || writes != 1 || announced != 1 {
		t.Errorf("changed status: %d status patches, %d counted writes, %d announcements; want 1 each", c.statusPatches, writes, announced)
	}
	if got := fetch(t, c, "changed"); !ConditionIsTrue(got.Status.Conditions, bkv1.ConditionReady) {
		t.Errorf("server status = %+v, want Ready=True", got.Status.Conditions)
	}
}

// TestStatusPatcherConflictsOnAStaleCopy: a pass that worked from a copy older than the
// server's (a stale cache) fails with a conflict instead of overwriting newer
// conditions, and announces nothing: the retry decides again.
func TestStatusPatcherConflictsOnAStaleCopy(t *testing.T) {
	ctx := context.Background()
	c := newCountingClient(t, claim("stale"))
	stale := fetch(t, c, "stale")
	newer := stale.DeepCopy()
	SetCondition(&newer.Status.Conditions, 1, bkv1.ConditionReady, metav1.ConditionFalse, "StoreUnreachable", "newer verdict")
	if err := c.Status().Update(ctx, newer); err != nil {
		t.Fatal(err)
	}
	announced := 0
	p := NewStatusPatcher(c, stale, sbStatus, nil)
	p.AfterWrite(func() { announced++ })
	SetCondition(&stale.Status.Conditions, 1, bkv1.ConditionReady, metav1.ConditionTrue, "Provisioned", "older verdict")
	err := p.patch(ctx)
	if !apierrors.IsConflict(err) {
		t.Fatalf("patch from a stale copy: %v, want a conflict", err)
	}
	if announced != 0 {
		t.Error("a conflicting write announced its transition")
	}
	if got := fetch(t, c, "stale"); FindCondition(got.Status.Conditions, bkv1.ConditionReady).Message != "newer verdict" {
		t.Errorf("the stale write replaced the newer verdict: %+v", got.Status.Conditions)
	}
	res, err := RetryConflict(err)
	if err != nil || res.RequeueAfter != ConflictRetryDelay {
		t.Errorf("RetryConflict = %+v, %v; want a requeue after %s", res, err, ConflictRetryDelay)
	}
	boom := errors.New("boom")
	if _, err := RetryConflict(boom); !errors.Is(err, boom) {
		t.Errorf("RetryConflict(other error) = %v, want it back", err)
	}
}

// TestStatusPatcherIgnoresAnObjectGone: the object deleted while the pass ran is not an
// error, and nothing is announced.
func TestStatusPatcherIgnoresAnObjectGone(t *testing.T) {
	ctx := context.Background()
	c := newCountingClient(t, claim("gone"))
	sb := fetch(t, c, "gone")
	if err := c.Delete(ctx, sb.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	announced := 0
	p := NewStatusPatcher(c, sb, sbStatus, nil)
	p.AfterWrite(func() { announced++ })
	SetCondition(&sb.Status.Conditions, 1, bkv1.ConditionReady, metav1.ConditionTrue, "Provisioned", "")
	if err := p.patch(ctx); err != nil {
		t.Errorf("patch of a deleted object: %v, want nil", err)
	}
	if announced != 0 {
		t.Error("a write to a deleted object announced its transition")
	}
}

// TestWriteNowThenTheDeferredPatch: a record written at once (the create intent) is
// compared against by the deferred patch, so an unchanged rest of the pass writes
// nothing more, and what was queued before WriteNow is announced by it, once.
func TestWriteNowThenTheDeferredPatch(t *testing.T) {
	ctx := context.Background()
	c := newCountingClient(t, claim("intent"))
	sb := fetch(t, c, "intent")
	announced := 0
	p := NewStatusPatcher(c, sb, sbStatus, nil)
	sb.Status.CreateIntent = &bkv1.CreateIntent{BucketName: "tenant-intent", UID: "u1"}
	p.AfterWrite(func() { announced++ })
	if err := p.WriteNow(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.patch(ctx); err != nil {
		t.Fatal(err)
	}
	if c.statusPatches != 1 || announced != 1 {
		t.Errorf("WriteNow then an unchanged pass: %d status patches, %d announcements; want 1 each", c.statusPatches, announced)
	}
	SetCondition(&sb.Status.Conditions, 1, bkv1.ConditionReady, metav1.ConditionTrue, "Provisioned", "")
	if err := p.patch(ctx); err != nil {
		t.Fatal(err)
	}
	got := fetch(t, c, "intent")
	if c.statusPatches != 2 || got.Status.CreateIntent == nil || !ConditionIsTrue(got.Status.Conditions, bkv1.ConditionReady) {
		t.Errorf("after a change past WriteNow: %d status patches, server status %+v", c.statusPatches, got.Status)
	}
}

// TestPatchMetadataKeepsTheStatusBeingBuilt: a finalizer added mid-pass takes back only
// the new metadata, so the status the pass is building survives, and the deferred
// status write, whose base moved on with the metadata patch, does not conflict.
func TestPatchMetadataKeepsTheStatusBeingBuilt(t *testing.T) {
	ctx := context.Background()
	c := newCountingClient(t, claim("meta"))
	sb := fetch(t, c, "meta")
	p := NewStatusPatcher(c, sb, sbStatus, nil)
	SetCondition(&sb.Status.Conditions, 1, bkv1.ConditionReady, metav1.ConditionTrue, "Provisioned", "built")
	rv := sb.ResourceVersion
	if err := PatchMetadata(ctx, c, sb, func(o *bkv1.StorageBucket) { o.Finalizers = append(o.Finalizers, bkv1.Finalizer) }); err != nil {
		t.Fatal(err)
	}
	if sb.ResourceVersion == rv || len(sb.Finalizers) != 1 || FindCondition(sb.Status.Conditions, bkv1.ConditionReady) == nil {
		t.Fatalf("after PatchMetadata: rv %s (was %s), finalizers %v, conditions %+v", sb.ResourceVersion, rv, sb.Finalizers, sb.Status.Conditions)
	}
	if err := p.patch(ctx); err != nil {
		t.Fatalf("status write after a metadata patch: %v", err)
	}
	got := fetch(t, c, "meta")
	if len(got.Finalizers) != 1 || !ConditionIsTrue(got.Status.Conditions, bkv1.ConditionReady) {
		t.Errorf("server has finalizers %v, conditions %+v", got.Finalizers, got.Status.Conditions)
	}
}

// TestPatchMetadataLocksFinalizersOnly: a finalizer change from a stale copy conflicts
// (a merge patch replaces the list whole, and would drop another controller's
// finalizer); an annotation change from the same stale copy merges key by key.
func TestPatchMetadataLocksFinalizersOnly(t *testing.T) {
	ctx := context.Background()
	c := newCountingClient(t, claim("lock"))
	stale := fetch(t, c, "lock")
	other := stale.DeepCopy()
	other.Finalizers = []string{"example.com/other"}
	if err := c.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	err := PatchMetadata(ctx, c, stale.DeepCopy(), func(o *bkv1.StorageBucket) { o.Finalizers = append(o.Finalizers, bkv1.Finalizer) })
	if !apierrors.IsConflict(err) {
		t.Errorf("finalizer patch from a stale copy: %v, want a conflict", err)
	}
	if err := PatchMetadata(ctx, c, stale.DeepCopy(), func(o *bkv1.StorageBucket) {
		o.Annotations = map[string]string{bkv1.AnnotationProbeRequestedAt: "1"}
	}); err != nil {
		t.Errorf("annotation patch from a stale copy: %v", err)
	}
	if got := fetch(t, c, "lock"); len(got.Finalizers) != 1 || got.Finalizers[0] != "example.com/other" {
		t.Errorf("the other controller's finalizer: %v", got.Finalizers)
	}
}

// TestSetConditionKeepsTransitionTimeAndBoundsMessages: the same verdict set again
// leaves the status equal (so no write), a changed one moves the transition time, and a
// message past the API's limit is cut rather than refused.
func TestSetConditionKeepsTransitionTimeAndBoundsMessages(t *testing.T) {
	var conds []metav1.Condition
	SetCondition(&conds, 1, bkv1.ConditionReady, metav1.ConditionFalse, "StoreUnreachable", "down")
	first := conds[0].LastTransitionTime
	conds[0].LastTransitionTime = metav1.NewTime(first.Add(-time.Hour))
	before := conds[0].LastTransitionTime
	SetCondition(&conds, 1, bkv1.ConditionReady, metav1.ConditionFalse, "StoreUnreachable", "down")
	if !conds[0].LastTransitionTime.Equal(&before) {
		t.Error("the same verdict moved the transition time")
	}
	SetCondition(&conds, 2, bkv1.ConditionReady, metav1.ConditionTrue, "Provisioned", strings.Repeat("x", 40*1024))
	if conds[0].LastTransitionTime.Equal(&before) || conds[0].ObservedGeneration != 2 {
		t.Errorf("a new verdict kept transition time %v / generation %d", conds[0].LastTransitionTime, conds[0].ObservedGeneration)
	}
	if n := len(conds[0].Message); n != 32*1024 || !strings.HasSuffix(conds[0].Message, "...") {
		t.Errorf("message of 40 KiB kept %d bytes", n)
	}
}

// TestWriteNowOfAGoneObject: a record that must be on the server before the next step
// acts (the create intent) is not made on an object that is gone, and WriteNow says
// so: the API server may remove a claim whose finalizer it reported added, when a
// deletion raced the finalizer (kubernetes/kubernetes#77988), and a CreateBucket sent
// then would make a bucket no claim is left to delete. The deferred write of a pass
// still takes a gone object for one that needs no status.
func TestWriteNowOfAGoneObject(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = bkv1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&bkv1.StorageBucket{}).Build()
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "data", UID: "u", ResourceVersion: "7"}}
	p := NewStatusPatcher(c, sb, func(sb *bkv1.StorageBucket) any { return sb.Status }, nil)
	sb.Status.CreateIntent = &bkv1.CreateIntent{BucketName: "b", UID: sb.UID}
	if err := p.WriteNow(context.Background()); !apierrors.IsNotFound(err) {
		t.Fatalf("WriteNow on a gone object = %v, want NotFound", err)
	}
	if err := p.patch(context.Background()); err != nil {
		t.Fatalf("the deferred write on a gone object = %v, want nil", err)
	}
}
