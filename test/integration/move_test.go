package integration_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
	"github.com/bucketkeeper/bucketkeeper/test/workload"
)

// TestMoveKeepsEveryAcknowledgedWrite moves a bucket between stores while an
// application writes, overwrites and deletes through its BucketAccess's Secret,
// retrying what fails (the cutover's refused writes) and re-reading the Secret as a
// volume-mounting application would. Every acknowledged write is on the target with its
// last content and every acknowledged delete absent: 0 lost, printed. The seeded
// objects' bytes are equal, the old key is refused on the source, the new one works on
// the target (the README's aws CLI recipe too, with the switched Secret alone), and the
// source is kept frozen and tagged as moved. Every pair of stores moves.
func TestMoveKeepsEveryAcknowledgedWrite(t *testing.T) {
	servers := map[testenv.S3Kind]func() *testenv.S3Server{
		testenv.SeaweedFS: func() *testenv.S3Server { return seaweed },
		testenv.Versity:   func() *testenv.S3Server { return versity },
		testenv.RGW:       func() *testenv.S3Server { return rgw },
	}
	for _, from := range moveTableStores {
		for _, to := range moveTableStores {
			if from == to {
				continue // TestMoveOntoItselfIsRefused
			}
			t.Run(string(from)+"-to-"+string(to), func(t *testing.T) {
				t.Parallel()
				testMoveKeepsWrites(t, servers[from](), servers[to]())
			})
		}
	}
}

func testMoveKeepsWrites(t *testing.T, src, tgt *testenv.S3Server) {
	testMoveKeepsWritesWatching(t, src, tgt, moveLook{})
}

// moveLook is what a caller of testMoveKeepsWritesWatching adds to the move: a longer
// life for the fixture's context (the writer's too), and a look at the move while it
// runs, with the key the writer holds.
type moveLook struct {
	longer      time.Duration
	whileMoving func(f *fixture, sb *bkv1.StorageBucket, key secretKey, bucket string)
}

func testMoveKeepsWritesWatching(t *testing.T, src, tgt *testenv.S3Server, watch moveLook) {
	f, target, sb := moveBetween(t, src, tgt)
	if watch.longer > 0 {
		f.longer(watch.longer)
	}
	bucket := sb.Status.BucketName
	ba := f.waitAccessReady(f.access("app", "app-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
	oldKey := f.secretClient("app-creds")
	seeded := f.seedObjects(f.admin, bucket, 120)

	w := f.startWriter("app-creds", bucket)
	w.waitAcks(20)
	f.moveTo(sb, target, "")
	if watch.whileMoving != nil {
		watch.whileMoving(f, sb, oldKey, bucket)
	}
	moved := f.waitMove(sb, bkv1.MoveDone, 4*time.Minute)
	w.waitAcksAfter(10, moved.Status.Move.SwitchedAt.Time)
	log := w.Stop()

	tgtAdmin := adminOf(t, f.ctx, tgt)
	lost := log.LostOn(f.ctx, tgtAdmin, bucket)
	t.Logf("%s to %s: %d puts and %d deletes acknowledged (%d retried), %d lost; write pause %s; moved %d objects, %d bytes",
		src.Kind, tgt.Kind, log.Puts, log.Deletes, log.Retries, len(lost), moved.Status.Move.WritePause.Duration, moved.Status.Move.CopiedObjects, moved.Status.Move.CopiedBytes)
	if len(lost) > 0 {
		t.Errorf("%d acknowledged writes lost, first: %v", len(lost), lost[:min(5, len(lost))])
	}
	for key, sum := range seeded {
		body, err := tgtAdmin.GetObject(f.ctx, bucket, key, 1<<20)
		if err != nil || sha256.Sum256(body) != sum {
			t.Errorf("seeded object %s on the target: %v (content equal: %v)", key, err, err == nil && sha256.Sum256(body) == sum)
		}
	}

	// The bucket lives on the target; its Secret says so, and its key works there.
	if moved.Status.ObjectStore != target || moved.Status.Endpoint != tgt.Endpoint {
		t.Errorf("status after the move: objectStore %q endpoint %q, want %q %q", moved.Status.ObjectStore, moved.Status.Endpoint, target, tgt.Endpoint)
	}
	ba = f.waitAccessReady(ba)
	newKey := f.secretClient("app-creds")
	if ba.Status.ObjectStore != target || newKey.id == oldKey.id {
		t.Errorf("access after the move: store %q, key %s (old %s)", ba.Status.ObjectStore, newKey.id, oldKey.id)
	}
	must(t, newKey.c.PutObject(f.ctx, bucket, "after-move", []byte("new home")))
	// The README's recipe, with the aws CLI and nothing but the switched Secret: its
	// bucket on the target, and no other bucket there.
	other := bucket + "-other"
	must(t, tgtAdmin.CreateBucket(f.ctx, other, ""))
	t.Cleanup(func() { _ = tgtAdmin.DeleteBucket(context.Background(), other) })
	creds := &corev1.Secret{}
	must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "app-creds"}, creds))
	if err := testenv.AWSCLIRecipe(f.ctx, t.TempDir(), creds.Data, string(creds.Data[bkv1.AccessSecretKeyEndpoint]), bucket, other); err != nil {
		t.Errorf("aws CLI with the switched Secret alone: %v", err)
	}
	f.waitKstatus("StorageBucket", client.ObjectKeyFromObject(sb), "Current")

	// The old key is refused on the source, which stays frozen and tagged as moved.
	f.waitKeyRejected(oldKey, bucket)
	f.eventually(30*time.Second, "the old key's read of the source refused", func() error {
		if _, err := oldKey.c.GetObject(f.ctx, bucket, "seed/000", 1<<20); err == nil {
			return fmt.Errorf("the old key %s still reads the source", oldKey.id)
		}
		return nil
	})
	tags, err := f.admin.GetBucketTagging(f.ctx, bucket)
	must(t, err)
	if want := target + "/" + bucket; tags[bkv1.TagMovedTo] != want {
		t.Errorf("source bucket tags %v, want %s=%s", tags, bkv1.TagMovedTo, want)
	}
	if policy, err := f.admin.GetBucketPolicy(f.ctx, bucket); err != nil || !containsAny(policy, bkv1.MoveFreezeSid) {
		t.Errorf("source bucket policy %q (%v): want the freeze", policy, err)
	}
	f.waitNoCheckpoints(moved.Status.Move.ID)
	user := iam.UserName(clusterID, string(ba.UID))
	f.eventually(90*time.Second, "the access's user gone from "+string(src.Kind)+"'s IAM", func() error {
		if slices.Contains(allUserNames(t, src), user) {
			return fmt.Errorf("user %s still on the source's IAM", user)
		}
		return nil
	})
	moveTable.Set(t, tgt.Kind, moveRow(src.Kind), cellMoved)
}

// moveBetween makes a fixture whose store is on src and a second store on tgt, both
// issuing keys through their IAM, and the claim "data", Ready on src; it returns the
// target store's name.
func moveBetween(t *testing.T, src, tgt *testenv.S3Server) (*fixture, string, *bkv1.StorageBucket) {
	t.Helper()
	f := newFixture(t, src, withIAMOn(src))
	target := f.storeOn(tgt, withIAMOn(tgt))
	f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	f.waitNamedStoreCondition(target, bkv1.ConditionAccessProviderReady, metav1.ConditionTrue, "")
	return f, target, f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
}

// moveTo asks, as the claim's owner, for sb's bucket to move to store.
func (f *fixture) moveTo(sb *bkv1.StorageBucket, store string, versions bkv1.MoveVersions) {
	f.t.Helper()
	f.update(k8s, sb, func() {
		sb.Spec.Move = &bkv1.MoveSpec{Versions: versions}
		sb.Spec.ObjectStoreRef.Name = store
	})
}

// seedObjects writes n objects of a few sizes and returns their hashes.
func (f *fixture) seedObjects(c s3.Client, bucket string, n int) map[string][32]byte {
	f.t.Helper()
	out := map[string][32]byte{}
	for i := range n {
		key := fmt.Sprintf("seed/%03d", i)
		body := make([]byte, (i%7)*1500)
		for j := range body {
			body[j] = byte(i + j)
		}
		must(f.t, c.PutObject(f.ctx, bucket, key, body))
		out[key] = sha256.Sum256(body)
	}
	return out
}

// waitMove waits until the claim's move reaches phase.
func (f *fixture) waitMove(sb *bkv1.StorageBucket, phase bkv1.MovePhase, timeout time.Duration) *bkv1.StorageBucket {
	f.t.Helper()
	got := &bkv1.StorageBucket{}
	f.eventually(timeout, fmt.Sprintf("move of %s %s", sb.Name, phase), func() error {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		if m := got.Status.Move; m == nil || m.Phase != phase {
			return fmt.Errorf("move %+v; conditions: %s", got.Status.Move, describe(got.Status.Conditions))
		}
		return nil
	})
	return got
}

// waitNoCheckpoints waits until a finished move's checkpoints are gone.
func (f *fixture) waitNoCheckpoints(moveID string) {
	f.t.Helper()
	f.eventually(30*time.Second, "the checkpoints of move "+moveID+" deleted", func() error {
		list := &corev1.ConfigMapList{}
		if err := k8s.List(f.ctx, list, client.InNamespace(moverNamespace)); err != nil {
			return err
		}
		for _, cm := range list.Items {
			if containsAny(cm.Name, moveID) {
				return fmt.Errorf("checkpoint %s still there", cm.Name)
			}
		}
		return nil
	})
}

func adminOf(t *testing.T, ctx context.Context, srv *testenv.S3Server) s3.Client {
	t.Helper()
	c, err := s3.New(ctx, s3.Config{Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
		AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey})
	must(t, err)
	return c
}

// writer is an application writing through an access's Secret (workload.Writer),
// stopped when the test ends.
type writer struct {
	*workload.Writer
	f *fixture
}

func (f *fixture) startWriter(secret, bucket string) *writer {
	return f.startWriterEvery(secret, bucket, 0)
}

// startWriterEvery is startWriter for a writer starting a request at most once every
// every (workload.StartEvery).
func (f *fixture) startWriterEvery(secret, bucket string, every time.Duration) *writer {
	w := workload.StartEvery(f.ctx, bucket, every, func(ctx context.Context) s3.Client { return f.secretClientCtx(ctx, secret).c })
	f.t.Cleanup(func() { w.Stop() })
	return &writer{Writer: w, f: f}
}

// waitAcks waits for n acknowledged requests.
func (w *writer) waitAcks(n int) { w.waitAcksAfter(n, time.Time{}) }

// waitAcksAfter waits for n requests acknowledged after since.
func (w *writer) waitAcksAfter(n int, since time.Time) {
	w.f.t.Helper()
	w.f.eventually(90*time.Second, fmt.Sprintf("%d writes acknowledged after %s", n, since.Format(time.RFC3339)), func() error {
		if got := w.AcksSince(since); got < n {
			return fmt.Errorf("%d so far", got)
		}
		return nil
	})
}

// secretClientCtx is secretClient for a goroutine: it never fails the test, and an
// unreadable Secret gives no client (nil), which the caller retries.
func (f *fixture) secretClientCtx(ctx context.Context, name string) secretKey {
	secret := &corev1.Secret{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: name}, secret); err != nil {
		return secretKey{}
	}
	return secretKey{id: string(secret.Data[bkv1.AccessSecretKeyAccessKeyID]), c: workload.SecretClient(ctx, secret.Data)}
}

func sha256Of(b []byte) [32]byte { return sha256.Sum256(b) }
