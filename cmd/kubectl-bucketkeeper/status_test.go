package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestStatusOfALaggingRetirement: midway through a retirement the store's
// status.retirement lags its claims (it says 0 moved and 2 moving, written before two
// moves finished). status must not contradict itself: listing every namespace, each
// figure is the claims' (2 moved, the bytes of those 2 finished moves, 1 moving, the
// queued one), and the Retired condition's message, the store's older counts, is not
// printed; listing one namespace only, the counts are the store's, said to be so, with
// nothing counted from the namespace's claims beside them.
func TestStatusOfALaggingRetirement(t *testing.T) {
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "minio"}, Spec: bkv1.ObjectStoreSpec{Endpoint: "http://127.0.0.1:9000",
		Retire: &bkv1.RetireSpec{Into: "ceph"}}}
	store.Status.Retirement = &bkv1.RetirementStatus{Into: "ceph", Moving: 2, Queued: 1}
	store.Status.Conditions = []metav1.Condition{
		{Type: bkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: bkv1.ConditionReady, Message: "the store answers"},
		{Type: bkv1.ConditionRetired, Status: metav1.ConditionFalse, Reason: bkv1.ReasonRetiring,
			Message: "3 StorageBuckets still use this store: 2 moving to ceph, 1 queued, 0 skipped, 0 not started yet; 0 moved"}}
	claim := func(ns, name, home string, m *bkv1.MoveStatus) client.Object {
		sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: "minio"}}}
		sb.Status.ObjectStore, sb.Status.Move = home, m
		sb.Status.Retirement = &bkv1.ClaimRetirement{From: "minio", Into: "ceph"}
		sb.Status.Conditions = []metav1.Condition{{Type: bkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: bkv1.ConditionReady}}
		return sb
	}
	done := func(copied int64) *bkv1.MoveStatus {
		return &bkv1.MoveStatus{From: "minio", To: "ceph", Phase: bkv1.MoveDone, CopiedBytes: copied, TotalBytes: copied}
	}
	claims := []client.Object{
		claim("team-a", "photos", "ceph", done(12<<10)),
		claim("team-b", "logs", "ceph", done(11<<10)),
		claim("team-a", "reports", "minio", &bkv1.MoveStatus{From: "minio", To: "ceph", Phase: bkv1.MoveCopying, CopiedBytes: 1 << 20, TotalBytes: 4 << 20}),
		claim("team-b", "queued", "minio", &bkv1.MoveStatus{From: "minio", To: "ceph", Phase: bkv1.MoveQueued}),
	}
	countsLine := regexp.MustCompile(`buckets[^:]*: (\d+) moved, (\d+) moving, (\d+) queued, (\d+) skipped, (\d+) not started`)
	finished := regexp.MustCompile(`moved: \S+ in (\d+) finished moves`)
	for _, tc := range []struct {
		name, golden string
		// oneNamespace: the caller may list the claims of team-a only.
		oneNamespace bool
		counts       []int // moved, moving, queued, skipped, not started
		// finished is the "N finished moves" figure; 0 when none may be shown.
		finished int
	}{
		{name: "every namespace: the claims' counts", golden: "status-retirement-lagging.golden", counts: []int{2, 1, 1, 0, 0}, finished: 2},
		{name: "one namespace: the store's counts", golden: "status-retirement-lagging-namespace.golden", oneNamespace: true, counts: []int{0, 2, 1, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(mustScheme(t)).WithObjects(append(claims, store.DeepCopy())...).WithInterceptorFuncs(interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					lo := (&client.ListOptions{}).ApplyOptions(opts)
					if tc.oneNamespace && lo.Namespace != "team-a" {
						return apierrors.NewForbidden(schema.GroupResource{Group: bkv1.GroupVersion.Group, Resource: "storagebuckets"}, "", nil)
					}
					return c.List(ctx, list, opts...)
				},
			}).Build()
			ns := "team-a"
			config := genericclioptions.NewConfigFlags(false)
			config.Namespace = &ns
			o := &options{config: config, color: "never", kube: c}
			tgt, err := parseTarget("objectstore/minio", "", kindObjectStore, kindObjectStore)
			must(t, err)
			st, err := o.storeStatus(context.Background(), tgt)
			must(t, err)
			var out bytes.Buffer
			must(t, o.printStoreStatus(&out, st))
			text := out.String()
			golden(t, tc.golden, text)

			// One snapshot: one counts line, each figure beside it agreeing with it.
			lines := countsLine.FindAllStringSubmatch(text, -1)
			if len(lines) != 1 {
				t.Fatalf("want one counts line, got %d:\n%s", len(lines), text)
			}
			for i, want := range tc.counts {
				if got, _ := strconv.Atoi(lines[0][i+1]); got != want {
					t.Errorf("counts line %q: figure %d is %d, want %d", lines[0][0], i, got, want)
				}
			}
			got := 0
			if m := finished.FindStringSubmatch(text); m != nil {
				got, _ = strconv.Atoi(m[1])
			}
			if got != tc.finished {
				t.Errorf("%d finished moves shown, want %d, beside %q:\n%s", got, tc.finished, lines[0][0], text)
			}
			if strings.Contains(text, "; 0 moved") && got > 0 {
				t.Errorf("the store's older count (0 moved) printed beside %d finished moves:\n%s", got, text)
			}
		})
	}
}
