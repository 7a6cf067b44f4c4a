package integration_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestMoveStatusSaysMovingAndNoStoreText moves a bucket from SeaweedFS to Ceph RGW
// while a watch collects every version of its claim. For a while the target refuses
// the mover's listing of the bucket with 403 AccessDenied, its message naming an
// internal address and a TLS detail, as a store behind a gateway may: the move waits
// and says so (status.move.message names the side, the operation and the store's
// code), in words that name neither that text nor the stores' endpoints, in
// status.move.message, the conditions and the Events. Once the target answers again
// the move is Done, and every status the operator wrote from the move's start to
// Done says Reconciling=True, reason Moving (docs/moving.md), the one that records
// the target bucket in the middle of a pass too.
func TestMoveStatusSaysMovingAndNoStoreText(t *testing.T) {
	const internal = "backend 10.20.30.40:7480 refused the request: tls: failed to verify certificate: x509: certificate signed by unknown authority"
	f := newFixture(t, seaweed)
	proxy := newTargetProxy(t, rgw.Endpoint)
	target := f.storeOn(rgw, func(s *bkv1.ObjectStore) { s.Spec.Endpoint = proxy.URL })
	sb := f.waitCondition(f.bucket("data", func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete }),
		bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := sb.Status.BucketName
	seeded := f.seedObjects(f.admin, bucket, 20)
	tgtAdmin := adminOf(t, f.ctx, rgw)
	forbidden := []string{"10.20.30.40", "x509", "certificate", hostOf(t, proxy.URL), hostOf(t, rgw.Endpoint), hostOf(t, seaweed.Endpoint)}

	writes := watchClaim(t, f, sb)
	proxy.refuse(func(r *http.Request) string {
		if bucketOf(r) == bucket && r.Method == http.MethodGet && r.URL.Query().Has("list-type") {
			return internal
		}
		return ""
	})
	f.moveTo(sb, target, "")
	var waiting string
	f.eventually(2*time.Minute, "the move to report the target's refusal", func() error {
		got := f.get(sb)
		if m := got.Status.Move; m == nil || !strings.Contains(m.Message, "the mover retries after") {
			return errf("move %+v", got.Status.Move)
		}
		waiting = got.Status.Move.Message
		return nil
	})
	t.Logf("while the target refuses: %s", waiting)
	if !strings.Contains(waiting, "AccessDenied") || !strings.Contains(waiting, "target") {
		t.Errorf("status.move.message %q does not say the target denied the mover", waiting)
	}
	proxy.refuse(nil)
	f.waitMovedOnce(sb, tgtAdmin, seeded, "done once the target answers")

	checked := 0
	for _, w := range writes() {
		for _, text := range statusTexts(&w) {
			if containsAny(text, forbidden...) {
				t.Errorf("resourceVersion %s says the store's text: %q", w.ResourceVersion, text)
			}
		}
		if w.Status.Move.Terminal() {
			continue
		}
		checked++
		if c := findCond(&w, bkv1.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue || c.Reason != bkv1.ReasonMoving {
			t.Errorf("resourceVersion %s, move %s (target bucket %q): Reconciling %+v, want True (Moving)", w.ResourceVersion, w.Status.Move.Phase, w.Status.Move.TargetBucket, c)
		}
	}
	if checked < 3 {
		t.Errorf("only %d writes of a running move seen", checked)
	}
	events := &eventsv1.EventList{}
	must(t, k8s.List(f.ctx, events, client.InNamespace(f.ns)))
	for _, e := range events.Items {
		if e.Regarding.Name == sb.Name && containsAny(e.Note, forbidden...) {
			t.Errorf("event %s says the store's text: %q", e.Reason, e.Note)
		}
	}
	t.Logf("%d status writes of the running move checked", checked)
}

// watchClaim collects every version of sb the API server has from now on; the
// function it returns stops and gives them, in order.
func watchClaim(t *testing.T, f *fixture, sb *bkv1.StorageBucket) func() []bkv1.StorageBucket {
	t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	var (
		mu   sync.Mutex
		seen []bkv1.StorageBucket
		done = make(chan struct{})
	)
	rv, name := f.get(sb).ResourceVersion, sb.Name // sb is the test's to update meanwhile
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w, err := k8sWatch.Watch(ctx, &bkv1.StorageBucketList{}, client.InNamespace(f.ns),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				got, ok := ev.Object.(*bkv1.StorageBucket)
				if !ok || ev.Type == watch.Bookmark || got.Name != name {
					continue
				}
				rv = got.ResourceVersion
				mu.Lock()
				seen = append(seen, *got.DeepCopy())
				mu.Unlock()
			}
			w.Stop()
		}
	}()
	stopped := false
	t.Cleanup(cancel)
	return func() []bkv1.StorageBucket {
		if !stopped {
			cancel()
			<-done
			stopped = true
		}
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// statusTexts are what a claim's status says in words: its conditions' messages and
// its move's.
func statusTexts(sb *bkv1.StorageBucket) []string {
	var out []string
	for _, c := range sb.Status.Conditions {
		out = append(out, c.Message)
	}
	if m := sb.Status.Move; m != nil {
		out = append(out, m.Message)
	}
	return out
}

// hostOf is the host:port of an endpoint URL.
func hostOf(t *testing.T, endpoint string) string {
	t.Helper()
	u, err := url.Parse(endpoint)
	must(t, err)
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		t.Fatalf("endpoint %s has no port", endpoint)
	}
	return u.Host
}
