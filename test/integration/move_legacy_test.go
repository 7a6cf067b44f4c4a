package integration_test

import (
	"context"
	"crypto/sha256"
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestMoveKeepsALegacyNameTheTargetAllows: a tenant's buckets on a lax store (any name
// allowed) carry legacy names, outside the lanes and the prefix of the store they
// move to. The target's platform team lists one pattern of them for the tenant's
// namespace (guardrails.legacyBucketNames). The bucket under a listed name moves
// keeping its name, every object with it, its connection Secret unchanged. A name not
// listed is refused MoveNotAllowed, in the same words whether the target has a bucket
// of that name (the platform's, with data and tags, left as it was) or not, and
// nothing reaches the target's bucket of the name (counted at a proxy in front of it)
// nor is any created there. Another namespace's claim of a name the pattern covers is
// refused too: the list names who may bring a name.
func TestMoveKeepsALegacyNameTheTargetAllows(t *testing.T) {
	t.Parallel()
	src, tgt := seaweed, versity
	const prefix = "lane"
	f := newFixture(t, src, func(s *bkv1.ObjectStore) { s.Spec.Guardrails.AllowAnyBucketName = true })
	f.longer(6 * time.Minute)
	base := "old-" + f.ns
	kept, unlisted, held, foreign := base+"-k-inv", base+"-rep", base+"-led", base+"-k-squat"
	proxy := newTargetProxy(t, tgt.Endpoint)
	target := f.storeOn(tgt, func(s *bkv1.ObjectStore) {
		s.Spec.Endpoint, s.Spec.BucketNamePrefix = proxy.URL, prefix
		s.Spec.Guardrails.LegacyBucketNames = []bkv1.LegacyBucketNames{{Names: []string{base + "-k-*"}, Namespaces: []string{f.ns}}}
	})
	other := f.tenantNamespace("legacy-other-")
	tgtAdmin := adminOf(t, f.ctx, tgt)

	// The platform team's bucket on the target under a name a claim moves with.
	heldTags := map[string]string{"owner": "platform"}
	must(t, tgtAdmin.CreateBucket(f.ctx, held, ""))
	must(t, tgtAdmin.PutObject(f.ctx, held, "q3.csv", []byte("the platform's ledger")))
	must(t, tgtAdmin.PutBucketTagging(f.ctx, held, heldTags))
	t.Cleanup(func() { emptyAndDelete(context.Background(), tgtAdmin, held) })

	tenant := asTenant(t, f)
	claims := map[string]*bkv1.StorageBucket{}
	for name, bucket := range map[string]string{"kept": kept, "unlisted": unlisted, "held": held, "foreign": foreign} {
		sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, BucketName: bucket,
				DeletionPolicy: bkv1.DeletionPolicyDelete}}
		c := tenant
		if name == "foreign" {
			sb.Namespace, c = other.Name, k8s
		}
		if name == "kept" {
			sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge // deleted with its objects before the proxy goes
		}
		must(t, c.Create(f.ctx, sb))
		claims[name] = f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	}
	seeded := f.seedObjects(f.admin, kept, 40)
	for _, sb := range claims {
		must(t, f.admin.PutObject(f.ctx, sb.Status.BucketName, "mine", []byte("the tenant's")))
	}
	for name, sb := range claims {
		c := tenant
		if name == "foreign" {
			c = k8s
		}
		f.update(c, sb, func() {
			sb.Spec.Move = &bkv1.MoveSpec{}
			sb.Spec.ObjectStoreRef.Name = target
		})
	}

	moved := f.waitMove(claims["kept"], bkv1.MoveDone, 4*time.Minute)
	if moved.Status.ObjectStore != target || moved.Status.BucketName != kept || moved.Status.Move.SourceBucket != "" {
		t.Errorf("after the move: objectStore %q, bucketName %q, move %+v; want %q under %q", moved.Status.ObjectStore, moved.Status.BucketName, moved.Status.Move, target, kept)
	}
	for key, sum := range seeded {
		if body, err := tgtAdmin.GetObject(f.ctx, kept, key, 1<<20); err != nil || sha256.Sum256(body) != sum {
			t.Errorf("object %s on the target: %v (content equal: %v)", key, err, err == nil && sha256.Sum256(body) == sum)
		}
	}
	f.eventually(time.Minute, "the connection Secret naming the target", func() error {
		d := f.secretData(moved.Status.ConnectionSecretName)
		if string(d[bkv1.SecretKeyBucketName]) != kept || !strings.Contains(string(d[bkv1.SecretKeyAWSEndpointS3]), strings.TrimPrefix(proxy.URL, "http://")) {
			return errf("%s=%q, %s=%q", bkv1.SecretKeyBucketName, d[bkv1.SecretKeyBucketName], bkv1.SecretKeyAWSEndpointS3, d[bkv1.SecretKeyAWSEndpointS3])
		}
		return nil
	})
	f.waitCondition(moved, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)

	messages := map[string]string{}
	for _, name := range []string{"unlisted", "held", "foreign"} {
		refused := f.waitMoveRefusedOrDone(claims[name])
		if refused.Status.Move.Phase == bkv1.MoveDone {
			t.Errorf("%s: moved onto the target as bucket %s", name, refused.Status.BucketName)
			continue
		}
		msg := findCond(refused, bkv1.ConditionStalled).Message
		if !strings.Contains(msg, "legacyBucketNames") || !strings.Contains(msg, "spec.move.bucketName: Lane") || !strings.Contains(msg, target) {
			t.Errorf("%s: refusal %q does not say how a legacy name moves", name, msg)
		}
		if !isTrue(refused, bkv1.ConditionReady) || refused.Status.ObjectStore != f.store || refused.Status.Move.TargetBucket != "" {
			t.Errorf("%s: the refused move took the bucket from its store: objectStore %q, move %+v", name, refused.Status.ObjectStore, refused.Status.Move)
		}
		// Each claim's own names aside: its bucket's, and the lane name it would take.
		msg = strings.ReplaceAll(msg, naming.BucketName(prefix, refused.Namespace, refused.Name), "LANE")
		messages[name] = strings.ReplaceAll(msg, refused.Status.BucketName, "NAME")
	}
	if messages["unlisted"] != messages["held"] {
		t.Errorf("the refusal tells a name the target has from one it does not:\n%s\n%s", messages["unlisted"], messages["held"])
	}
	for _, bucket := range []string{unlisted, held, foreign} {
		if sent := movesRequests(proxy.sent(bucket)); len(sent) > 0 {
			t.Errorf("requests reached the target's bucket %s: %v", bucket, sent)
		}
	}
	for _, bucket := range []string{unlisted, foreign} {
		if _, err := tgtAdmin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
			t.Errorf("bucket %s exists on the target after a refused move (%v)", bucket, err)
		}
	}
	body, err := tgtAdmin.GetObject(f.ctx, held, "q3.csv", 64)
	tags, terr := tgtAdmin.GetBucketTagging(f.ctx, held)
	if err != nil || string(body) != "the platform's ledger" || terr != nil || !maps.Equal(tags, heldTags) {
		t.Errorf("the platform's bucket %s: %q (%v), tags %v (%v)", held, body, err, tags, terr)
	}
	for _, name := range []string{"unlisted", "held", "foreign"} {
		if body, err := f.admin.GetObject(f.ctx, claims[name].Status.BucketName, "mine", 64); err != nil || string(body) != "the tenant's" {
			t.Errorf("%s: the tenant's bucket on its store: %q, %v", name, body, err)
		}
	}
	// The moved bucket goes through the proxy, which stops when the test ends.
	must(t, k8s.Delete(f.ctx, moved))
	f.waitGone(moved)
}

// TestMoveUnderTheTargetsLaneName: a bucket with a legacy name, outside the lanes and
// the prefix of the store it moves to, moves under spec.move.bucketName: Lane. It
// lives there under the name a new claim would get in its namespace's lane, with
// every object; the connection Secret and the BucketAccess Secret carry the new name
// (BUCKET_NAME), the access's new key writes there; status.bucketName and
// status.move.sourceBucket say both names, and the source is frozen and tagged with
// where the bucket went. Another namespace's claim holds, on the target, a bucket under
// the lane name a second claim of the tenant would take: that move is refused, and the
// victim's bucket keeps its data and tags, its claim Ready.
func TestMoveUnderTheTargetsLaneName(t *testing.T) {
	t.Parallel()
	src, tgt := seaweed, versity
	const prefix = "lane"
	f := newFixture(t, src, withIAMOn(src), func(s *bkv1.ObjectStore) { s.Spec.Guardrails.AllowAnyBucketName = true })
	f.longer(6 * time.Minute)
	target := f.storeOn(tgt, withIAMOn(tgt), func(s *bkv1.ObjectStore) {
		s.Spec.BucketNamePrefix = prefix
		s.Spec.Guardrails.AllowBucketNamesOutsideNamespace = true // until the victim has its bucket
	})
	f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	f.waitNamedStoreCondition(target, bkv1.ConditionAccessProviderReady, metav1.ConditionTrue, "")
	tgtAdmin := adminOf(t, f.ctx, tgt)

	// The victim, in another namespace, holds on the target the lane name the tenant's
	// claim "other" would take there.
	victimNS := f.tenantNamespace("legacy-victim-")
	squatted := naming.BucketName(prefix, f.ns, "other")
	victim := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: victimNS.Name, Name: "archive"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: target}, BucketName: squatted, DeletionPolicy: bkv1.DeletionPolicyDelete}}
	must(t, k8s.Create(f.ctx, victim))
	victim = f.waitCondition(victim, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	must(t, tgtAdmin.PutObject(f.ctx, squatted, "victim.txt", []byte("the victim's")))
	victimTags, err := tgtAdmin.GetBucketTagging(f.ctx, squatted)
	must(t, err)
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: target}}
	f.update(k8s, store, func() { store.Spec.Guardrails.AllowBucketNamesOutsideNamespace = false })

	legacy, legacyOther := "old-"+f.ns+"-data", "old-"+f.ns+"-other"
	sb := f.waitCondition(f.bucket("data", func(sb *bkv1.StorageBucket) { sb.Spec.BucketName = legacy }), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	second := f.waitCondition(f.bucket("other", func(sb *bkv1.StorageBucket) { sb.Spec.BucketName = legacyOther }), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	ba := f.waitAccessReady(f.access("app", "app-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
	oldKey := f.secretClient("app-creds")
	seeded := f.seedObjects(f.admin, legacy, 60)

	for _, c := range []*bkv1.StorageBucket{sb, second} {
		f.update(k8s, c, func() {
			c.Spec.Move = &bkv1.MoveSpec{BucketName: bkv1.MoveBucketNameLane}
			c.Spec.ObjectStoreRef.Name = target
		})
	}
	lane := naming.BucketName(prefix, f.ns, "data")
	moved := f.waitMove(sb, bkv1.MoveDone, 4*time.Minute)
	if m := moved.Status.Move; moved.Status.BucketName != lane || m.SourceBucket != legacy || m.TargetBucket != lane || moved.Status.ObjectStore != target {
		t.Errorf("after the move: bucketName %q objectStore %q, move source %q target %q; want %q on %q from %q", moved.Status.BucketName, moved.Status.ObjectStore, m.SourceBucket, m.TargetBucket, lane, target, legacy)
	}
	for key, sum := range seeded {
		if body, err := tgtAdmin.GetObject(f.ctx, lane, key, 1<<20); err != nil || sha256.Sum256(body) != sum {
			t.Errorf("object %s on the target under %s: %v (content equal: %v)", key, lane, err, err == nil && sha256.Sum256(body) == sum)
		}
	}
	if _, err := tgtAdmin.HeadBucket(f.ctx, legacy); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("the legacy name %s exists on the target (%v)", legacy, err)
	}
	f.eventually(time.Minute, "the Secrets carrying the lane name", func() error {
		conn := f.secretData(moved.Status.ConnectionSecretName)
		acc := f.secretData("app-creds")
		if string(conn[bkv1.SecretKeyBucketName]) != lane || string(acc[bkv1.AccessSecretKeyBucketName]) != lane ||
			string(acc[bkv1.AccessSecretKeyBucketNames]) != "data="+lane || string(acc[bkv1.AccessSecretKeyEndpoint]) != tgt.Endpoint {
			return errf("connection %s=%q; access %s=%q %s=%q endpoint %q", bkv1.SecretKeyBucketName, conn[bkv1.SecretKeyBucketName],
				bkv1.AccessSecretKeyBucketName, acc[bkv1.AccessSecretKeyBucketName], bkv1.AccessSecretKeyBucketNames, acc[bkv1.AccessSecretKeyBucketNames], acc[bkv1.AccessSecretKeyEndpoint])
		}
		return nil
	})
	ba = f.waitAccessReady(ba)
	newKey := f.secretClient("app-creds")
	if newKey.id == oldKey.id || ba.Status.ObjectStore != target {
		t.Errorf("access after the move: store %q, key %s (old %s)", ba.Status.ObjectStore, newKey.id, oldKey.id)
	}
	f.eventually(time.Minute, "the new key writing under the lane name", func() error {
		return newKey.c.PutObject(f.ctx, lane, "after-move", []byte("new home"))
	})
	tags, err := f.admin.GetBucketTagging(f.ctx, legacy)
	must(t, err)
	if want := target + "/" + lane; tags[bkv1.TagMovedTo] != want {
		t.Errorf("source bucket tags %v, want %s=%s", tags, bkv1.TagMovedTo, want)
	}
	if policy, err := f.admin.GetBucketPolicy(f.ctx, legacy); err != nil || !containsAny(policy, bkv1.MoveFreezeSid) {
		t.Errorf("source bucket policy %q (%v): want the freeze", policy, err)
	}
	if got := f.get(sb); len(got.Status.LeftBehind) != 1 || got.Status.LeftBehind[0] != f.store+"/"+legacy {
		t.Errorf("status.leftBehind %v, want [%s/%s]", got.Status.LeftBehind, f.store, legacy)
	}

	// The second move would take the victim's bucket's name: refused, the victim as it was.
	refused := f.waitMoveRefusedOrDone(second)
	if refused.Status.Move.Phase == bkv1.MoveDone || refused.Status.ObjectStore != f.store || !isTrue(refused, bkv1.ConditionReady) {
		t.Errorf("the move onto another claim's bucket: %+v, objectStore %q", refused.Status.Move, refused.Status.ObjectStore)
	}
	body, err := tgtAdmin.GetObject(f.ctx, squatted, "victim.txt", 64)
	after, terr := tgtAdmin.GetBucketTagging(f.ctx, squatted)
	if err != nil || string(body) != "the victim's" || terr != nil || !maps.Equal(after, victimTags) {
		t.Errorf("the victim's bucket %s: %q (%v), tags %v (%v), before %v", squatted, body, err, after, terr, victimTags)
	}
	if page, err := tgtAdmin.ListObjectVersions(f.ctx, squatted, nil); err != nil || len(page.Versions) != 1 {
		t.Errorf("the victim's bucket holds %+v (%v), want its one object", page.Versions, err)
	}
	f.waitCondition(victim, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
}
