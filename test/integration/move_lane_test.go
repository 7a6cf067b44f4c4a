package integration_test

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// moveSources pairs each store a move goes to with another one it comes from.
func moveSources() map[*testenv.S3Server]*testenv.S3Server {
	return map[*testenv.S3Server]*testenv.S3Server{seaweed: rgw, versity: seaweed, rgw: seaweed}
}

// TestMoveHeldToTheTargetsLanes: a tenant on a lax store (any bucket name allowed)
// makes buckets named in another namespace's lane of a shared store that keeps lanes
// (one of those names exists there already, with the platform team's data, the other
// does not), and a bucket whose name is derived with the lax store's prefix (none),
// then moves all three onto the shared store, as a tenant would. Each move is refused
// MoveNotAllowed naming the target's rule (the lane, or its bucketNamePrefix) before
// any request reaches the target's bucket of that name (counted at a proxy in front
// of the target), with the same words whether the name exists there or not; the
// buckets keep serving from the lax store. The other namespace's later claim of the
// name is Ready with a bucket it created, and the existing bucket keeps its data and
// tags. On every store as the target.
func TestMoveHeldToTheTargetsLanes(t *testing.T) {
	for tgt, src := range moveSources() {
		t.Run(string(tgt.Kind), func(t *testing.T) {
			t.Parallel()
			testMoveHeldToTheTargetsLanes(t, src, tgt)
		})
	}
}

func testMoveHeldToTheTargetsLanes(t *testing.T, src, tgt *testenv.S3Server) {
	const prefix = "lane"
	f := newFixture(t, src, func(s *bkv1.ObjectStore) { s.Spec.Guardrails.AllowAnyBucketName = true })
	proxy := newTargetProxy(t, tgt.Endpoint)
	target := f.storeOn(tgt, func(s *bkv1.ObjectStore) { s.Spec.Endpoint, s.Spec.BucketNamePrefix = proxy.URL, prefix })
	victimNS := f.ns + "-v"
	must(t, k8s.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: victimNS}}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = k8s.DeleteAllOf(ctx, &bkv1.StorageBucket{}, client.InNamespace(victimNS))
		removeNamespace(t, ctx, victimNS)
	})
	tgtAdmin := adminOf(t, f.ctx, tgt)

	// The platform team's bucket in the victim's lane on the target, with data and tags.
	held := naming.LaneStem(prefix, victimNS) + "reports"
	heldTags := map[string]string{"owner": "platform"}
	must(t, tgtAdmin.CreateBucket(f.ctx, held, ""))
	must(t, tgtAdmin.PutObject(f.ctx, held, "q3.csv", []byte("the victim's reports")))
	must(t, tgtAdmin.PutBucketTagging(f.ctx, held, heldTags))
	t.Cleanup(func() { emptyAndDelete(context.Background(), tgtAdmin, held) })
	missing := naming.LaneStem(prefix, victimNS) + "archive"

	tenant := asTenant(t, f)
	claims := map[string]*bkv1.StorageBucket{}
	for name, bucket := range map[string]string{"squat-held": held, "squat-missing": missing, "derived": ""} {
		sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, BucketName: bucket,
				DeletionPolicy: bkv1.DeletionPolicyDelete}}
		must(t, tenant.Create(f.ctx, sb))
		claims[name] = f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	}
	derived := claims["derived"].Status.BucketName
	if strings.HasPrefix(derived, prefix) {
		t.Fatalf("the derived name %q starts with the target's prefix already", derived)
	}
	for _, sb := range claims {
		must(t, f.admin.PutObject(f.ctx, sb.Status.BucketName, "mine", []byte("the tenant's")))
	}
	before := requests.snapshot(target)

	for _, sb := range claims {
		f.update(tenant, sb, func() {
			sb.Spec.Move = &bkv1.MoveSpec{}
			sb.Spec.ObjectStoreRef.Name = target
		})
	}
	messages := map[string]string{}
	for name, sb := range claims {
		refused := f.waitMoveRefusedOrDone(sb)
		if refused.Status.Move.Phase == bkv1.MoveDone {
			t.Errorf("%s: moved onto the target as bucket %s", name, refused.Status.BucketName)
			continue
		}
		msg := findCond(refused, bkv1.ConditionStalled).Message
		want := `"` + naming.LaneStem(prefix, f.ns) + `"` // the tenant's own lane there
		if name == "derived" {
			want = "bucketNamePrefix " + `"` + prefix + `"`
		}
		if !strings.Contains(msg, want) || !strings.Contains(msg, target) {
			t.Errorf("%s: refusal %q does not name the target's rule (%s)", name, msg, want)
		}
		if !isTrue(refused, bkv1.ConditionReady) || refused.Status.ObjectStore != f.store || refused.Status.Move.TargetBucket != "" {
			t.Errorf("%s: the refused move took the bucket from its store: Ready %v, objectStore %q, move %+v", name, isTrue(refused, bkv1.ConditionReady), refused.Status.ObjectStore, refused.Status.Move)
		}
		// Each claim's own names aside: its bucket's, and the lane name it could move
		// under (spec.move.bucketName: Lane), which the refusal offers.
		msg = strings.ReplaceAll(msg, naming.BucketName(prefix, refused.Namespace, refused.Name), "LANE")
		messages[name] = strings.ReplaceAll(msg, refused.Status.BucketName, "NAME")
	}
	if messages["squat-held"] != messages["squat-missing"] {
		t.Errorf("the refusal tells a name the target has from one it does not:\n%s\n%s", messages["squat-held"], messages["squat-missing"])
	}
	// Nothing reached the target's buckets of those names, nor the target but for its
	// health checks.
	for _, bucket := range []string{held, missing, derived} {
		if sent := movesRequests(proxy.sent(bucket)); len(sent) > 0 {
			t.Errorf("requests reached the target's bucket %s: %v", bucket, sent)
		}
	}
	if _, _, ops := since(before, requests.snapshot(target)); len(ops) > 1 || (len(ops) == 1 && ops["ListBuckets"] == 0) {
		t.Errorf("refused moves sent requests to the target: %v", ops)
	}
	for _, bucket := range []string{missing, derived} {
		if _, err := tgtAdmin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
			t.Errorf("bucket %s exists on the target after a refused move (%v)", bucket, err)
		}
	}
	for _, sb := range claims {
		if body, err := f.admin.GetObject(f.ctx, sb.Status.BucketName, "mine", 64); err != nil || string(body) != "the tenant's" {
			t.Errorf("%s: the tenant's bucket on its store: %q, %v", sb.Name, body, err)
		}
	}

	// The victim's claim of the name the tenant tried to squat gets a bucket it created.
	victim := &fixture{t: t, ctx: f.ctx, ns: victimNS, store: target, server: tgt, admin: tgtAdmin}
	got := victim.waitCondition(victim.bucket("archive", func(sb *bkv1.StorageBucket) {
		sb.Spec.BucketName, sb.Spec.DeletionPolicy = missing, bkv1.DeletionPolicyDelete
	}), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	if c := findCond(got, bkv1.ConditionProvisioned); c == nil || c.Reason != bkv1.ReasonBucketCreated {
		t.Errorf("the victim's claim: Provisioned %+v, want BucketCreated", c)
	}
	defer func() { // its bucket goes through the proxy, which stops when the test ends
		must(t, k8s.Delete(f.ctx, got))
		victim.waitGone(got)
	}()
	heldUnchanged := func(when string) {
		body, err := tgtAdmin.GetObject(f.ctx, held, "q3.csv", 64)
		tags, terr := tgtAdmin.GetBucketTagging(f.ctx, held)
		if err != nil || string(body) != "the victim's reports" || terr != nil || !maps.Equal(tags, heldTags) {
			t.Errorf("the platform's bucket %s: %q (%v), tags %v (%v)", when, body, err, tags, terr)
		}
	}
	heldUnchanged("after the refused moves")

	// Cancelled, the moves leave the target as it was.
	for _, sb := range claims {
		f.update(tenant, sb, func() { sb.Spec.ObjectStoreRef.Name = f.store })
		f.waitMove(sb, bkv1.MoveAborted, time.Minute)
	}
	heldUnchanged("after the moves were cancelled")
	if sent := movesRequests(proxy.sent(held)); len(sent) > 0 {
		t.Errorf("the cancels sent requests to the target's bucket %s: %v", held, sent)
	}
}

// waitMoveRefusedOrDone waits until sb's move is refused (Stalled, MoveNotAllowed) or
// done, and returns the claim as it is then.
func (f *fixture) waitMoveRefusedOrDone(sb *bkv1.StorageBucket) *bkv1.StorageBucket {
	f.t.Helper()
	var got *bkv1.StorageBucket
	f.eventually(2*time.Minute, "the move of "+sb.Name+" refused or done", func() error {
		got = f.get(sb)
		c := findCond(got, bkv1.ConditionStalled)
		if m := got.Status.Move; m != nil && (m.Phase == bkv1.MoveDone ||
			c != nil && c.Status == metav1.ConditionTrue && c.Reason == bkv1.ReasonMoveNotAllowed && c.ObservedGeneration == got.Generation) {
			return nil
		}
		return errf("move %+v; conditions: %s", got.Status.Move, describe(got.Status.Conditions))
	})
	return got
}

// movesRequests leaves out of what reached a bucket the reads of its tags alone: the
// sweep of move leftovers reads the tags of every bucket of a store's account that a
// claim names, on any store, on its own schedule, and tells no tenant what it found.
// A move's own path to a bucket starts with a HEAD or a CreateBucket, which stay.
func movesRequests(sent []string) []string {
	return slices.DeleteFunc(slices.Clone(sent), func(r string) bool {
		method, uri, _ := strings.Cut(r, " ")
		path, query, _ := strings.Cut(uri, "?")
		return method == http.MethodGet && query == "tagging=" && strings.Count(strings.Trim(path, "/"), "/") == 0
	})
}
