package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
	"github.com/bucketkeeper/bucketkeeper/test/workload"
)

// The bucket the kill test moves: small objects, and large ones copied part by part,
// so that a kill can land in the middle of one.
const (
	killSmallObjects = 100
	killLargeObjects = 2
	killLargeSize    = 48 << 20
	killPartSize     = 5 << 20
	// killClusterID names the binary's IAM users, so the test can look for them.
	killClusterID = "e2e-move-kill"
)

// TestMoveSurvivesSIGKILLOfTheOperator moves a bucket to Ceph RGW with the real
// operator binary, its mover in-process, while an application writes, overwrites and
// deletes through its BucketAccess's Secret, once from SeaweedFS and once from MinIO.
// The operator is killed with SIGKILL five times, each once the stores or the API show
// the point it was meant to die at: the mover in the middle of a large object (a
// multipart upload open on the target), between passes (catching up), during the
// cutover before the Secret switch (the source frozen: on MinIO, which applies bucket
// policies to anonymous requests only, the issued key's user frozen too), after the
// Secret switch, and during the source's deletion (spec.move.deleteSourceAfter). Each
// time a new process carries on. The move ends Done with every seeded object equal, 0
// acknowledged writes lost, the old key's user gone from the source, the source
// deleted, and the operator's key having written at most 1.2 times the bucket's bytes
// to the target, counted by a proxy in front of it. The runs are one after the other:
// each runs its own operator over every namespace, with the same cluster ID.
func TestMoveSurvivesSIGKILLOfTheOperator(t *testing.T) {
	dir := t.TempDir()
	bin, kubeconfig := buildOperator(t, dir)
	for _, kind := range []testenv.S3Kind{testenv.SeaweedFS, testenv.MinIO} {
		t.Run("from-"+string(kind), func(t *testing.T) {
			source := seaweed
			if kind == testenv.MinIO {
				// MinIO is none of the package's servers: this run starts its own,
				// stopped after the fixtures' cleanup.
				source = testenv.NewS3(t, testenv.MinIO)
			}
			testMoveSurvivesSIGKILL(t, source, bin, kubeconfig, filepath.Join(dir, string(kind)))
		})
	}
}

// testMoveSurvivesSIGKILL is TestMoveSurvivesSIGKILLOfTheOperator's move off source.
func testMoveSurvivesSIGKILL(t *testing.T, source *testenv.S3Server, bin, kubeconfig, dir string) {
	must(t, os.MkdirAll(dir, 0o755))
	moves := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-moves-"}}
	must(t, k8s.Create(context.Background(), moves))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), moves) })
	op := startKillable(t, bin, kubeconfig, dir, "--mover=in-process", "--mover-namespace", moves.Name, "--cluster-id", killClusterID)
	proxy, err := testenv.StartCountingProxy(rgw.Endpoint, rgw.AccessKeyID)
	must(t, err)
	t.Cleanup(func() { _ = proxy.Close() })

	// Both stores are paced, so that every phase lasts long enough to be seen.
	paced := func(s *bkv1.ObjectStore) { s.Spec.RequestsPerSecond, s.Spec.Burst = 20, 20 }
	target := newFixtureOn(t, rgw, "", iamOn(rgw), paced, func(s *bkv1.ObjectStore) { s.Spec.Endpoint = proxy.Endpoint })
	f := newFixtureOn(t, source, "", iamOn(source), paced)
	srcIAM, err := iam.New(f.ctx, adminIAM(source))
	must(t, err)
	tgtAdmin, err := s3.New(f.ctx, s3.Config{Endpoint: rgw.Endpoint, Region: rgw.Region, ForcePathStyle: true,
		AccessKeyID: rgw.AccessKeyID, SecretAccessKey: rgw.SecretAccessKey})
	must(t, err)

	sb := f.waitCondition(f.bucket("data", nil), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady, 3*time.Minute)
	bucket := sb.Status.BucketName
	ba := &bkv1.BucketAccess{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app"},
		Spec:       bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{{Name: "data", Mode: bkv1.AccessReadWrite}}, SecretName: "app-creds"},
	}
	must(t, k8s.Create(f.ctx, ba))
	f.eventually(2*time.Minute, "the access Ready", func() error {
		got := &bkv1.BucketAccess{}
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(ba), got); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(got.Status.Conditions, bkv1.ConditionReady) {
			return fmt.Errorf("conditions: %s", testenv.DescribeConditions(got.Status.Conditions))
		}
		ba = got
		return nil
	})
	seeded, size := seedKillBucket(t, f, bucket)
	w := workload.Start(f.ctx, bucket, func(ctx context.Context) s3.Client { return appClient(ctx, f.ns, "app-creds") })
	t.Cleanup(func() { w.Stop() })
	f.eventually(time.Minute, "the application's first writes", func() error {
		if n := w.AcksSince(time.Time{}); n < 20 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})

	patch := client.MergeFrom(sb.DeepCopy())
	sb.Spec.ObjectStoreRef.Name = target.store
	sb.Spec.Move = &bkv1.MoveSpec{DeleteSourceAfter: &metav1.Duration{Duration: 2 * time.Second}}
	must(t, k8s.Patch(f.ctx, sb, patch))

	move := func() *bkv1.MoveStatus {
		got := &bkv1.StorageBucket{}
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), got); err != nil || got.Status.Move == nil {
			return &bkv1.MoveStatus{}
		}
		return got.Status.Move
	}
	phase := func(want bkv1.MovePhase) func() error {
		return func() error {
			if m := move(); m.Phase != want {
				return fmt.Errorf("phase %q (%s)", m.Phase, m.Message)
			}
			return nil
		}
	}
	op.killWhen("the mover in the middle of a large object", func() error {
		page, err := tgtAdmin.ListMultipartUploads(f.ctx, bucket, nil)
		if err != nil {
			return err
		}
		for _, u := range page.Uploads {
			if strings.HasPrefix(u.Key, "big/") {
				return nil
			}
		}
		return fmt.Errorf("no multipart upload open on the target (%d bytes written)", proxy.Written())
	})
	op.killWhen("between passes, catching up", phase(bkv1.MoveCatchingUp))
	op.killWhen("during the cutover, before the Secret switch", func() error {
		if err := phase(bkv1.MoveCuttingOver)(); err != nil {
			return err
		}
		if policy, err := f.s3.GetBucketPolicy(f.ctx, bucket); err != nil || !strings.Contains(policy, bkv1.MoveFreezeSid) {
			return fmt.Errorf("the source not frozen yet (%v)", err)
		}
		if iam.BucketPoliciesBindKeys(iamAPIOf(source)) {
			return nil
		}
		// The freeze that stops the application's key on MinIO, written after the
		// bucket policy's: its user's policy denies the bucket's writes.
		return userFrozen(f.ctx, srcIAM, issuedUser(ba))
	})
	op.killWhen("after the Secret switch", func() error {
		secret := &corev1.Secret{}
		if err := k8s.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "app-creds"}, secret); err != nil {
			return err
		}
		if got := string(secret.Data[bkv1.AccessSecretKeyEndpoint]); got != proxy.Endpoint {
			return fmt.Errorf("the Secret names %s", got)
		}
		return nil
	})
	op.killWhen("during the source's deletion", func() error {
		if m := move(); m.Phase != bkv1.MoveDone || m.SourceDeleted {
			return fmt.Errorf("phase %q, source deleted %v", m.Phase, m.SourceDeleted)
		}
		page, err := f.s3.ListObjectVersions(f.ctx, bucket, nil)
		if s3.KindOf(err) == s3.KindNotFound || (err == nil && len(page.Versions) == 0) {
			return nil
		}
		return fmt.Errorf("the source still holds %d objects (%v)", len(page.Versions), err)
	})

	f.eventually(3*time.Minute, "the move Done and its source deleted", func() error {
		if m := move(); m.Phase != bkv1.MoveDone || !m.SourceDeleted {
			return fmt.Errorf("phase %q, source deleted %v (%s)", m.Phase, m.SourceDeleted, m.Message)
		}
		return nil
	})
	pause := time.Duration(0)
	if m := move(); m.WritePause != nil {
		pause = m.WritePause.Duration
	}
	log := w.Stop()
	lost := log.LostOn(f.ctx, tgtAdmin, bucket)
	t.Logf("%d kills; %d puts and %d deletes acknowledged (%d retries), %d lost; write pause %s; the operator's key wrote %d bytes to the target for a bucket of %d",
		op.kills, log.Puts, log.Deletes, log.Retries, len(lost), pause, proxy.Written(), size)
	if len(lost) > 0 {
		t.Errorf("%d acknowledged writes lost on the target: %v", len(lost), lost)
	}
	if written := proxy.Written(); float64(written) > 1.2*float64(size) {
		t.Errorf("the operator wrote %d bytes to the target for a bucket of %d: more than 1.2 times", written, size)
	}
	for key, sum := range seeded {
		body, err := tgtAdmin.GetObject(f.ctx, bucket, key, killLargeSize)
		if err != nil || sha256.Sum256(body) != sum {
			t.Errorf("object %s on the target: %d bytes, %v; want the source's", key, len(body), err)
		}
	}
	if _, err := f.s3.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("the source bucket after deleteSourceAfter: %v, want it gone", err)
	}
	user := issuedUser(ba)
	f.eventually(time.Minute, "the access's old user gone from the source", func() error {
		names, err := iam.ListUserNames(f.ctx, srcIAM)
		if err == nil && slices.Contains(names, user) {
			err = fmt.Errorf("user %s still there", user)
		}
		return err
	})
	// The access and the claim, its bucket emptied, go while the last operator runs.
	must(t, k8s.Delete(f.ctx, ba))
	f.waitGone(ba, time.Minute)
	patch = client.MergeFrom(sb.DeepCopy())
	sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge
	must(t, k8s.Patch(f.ctx, sb, patch))
	must(t, k8s.Delete(f.ctx, sb))
	f.waitGone(sb, 2*time.Minute)
}

// seedKillBucket writes the small and the large objects (the large ones in parts) to
// bucket on its source store, and returns their hashes and the bucket's size.
func seedKillBucket(t *testing.T, f *fixture, bucket string) (map[string][32]byte, int64) {
	t.Helper()
	sums, size := map[string][32]byte{}, int64(0)
	for i := range killSmallObjects {
		key := fmt.Sprintf("seed/%03d", i)
		body := bytes.Repeat([]byte{byte(i)}, (i%7)*1500)
		must(t, f.s3.PutObject(f.ctx, bucket, key, body))
		sums[key], size = sha256.Sum256(body), size+int64(len(body))
	}
	for i := range killLargeObjects {
		key := fmt.Sprintf("big/%d", i)
		id, err := f.s3.CreateMultipartUpload(f.ctx, bucket, key, s3.ObjectMeta{})
		must(t, err)
		h := sha256.New()
		var parts []s3.Part
		for n := int32(1); int64(n-1)*killPartSize < killLargeSize; n++ {
			part := bytes.Repeat([]byte{byte(i), byte(n)}, min(killPartSize, killLargeSize-int(n-1)*killPartSize)/2)
			etag, err := f.s3.UploadPart(f.ctx, bucket, key, id, n, bytes.NewReader(part), int64(len(part)), "")
			must(t, err)
			parts = append(parts, s3.Part{Number: n, ETag: etag, Size: int64(len(part))})
			h.Write(part)
		}
		_, err = f.s3.CompleteMultipartUpload(f.ctx, bucket, key, id, parts)
		must(t, err)
		sums[key], size = [32]byte(h.Sum(nil)), size+killLargeSize
	}
	return sums, size
}

// appClient is the application's client from its Secret, nil while it cannot be read.
func appClient(ctx context.Context, ns, name string) s3.Client {
	secret := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		return nil
	}
	return workload.SecretClient(ctx, secret.Data)
}

// iamOn has a store issue keys through srv's IAM (MinIO's admin API on MinIO).
func iamOn(srv *testenv.S3Server) func(*bkv1.ObjectStore) {
	return func(s *bkv1.ObjectStore) {
		s.Spec.AccessProvider = &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM, IAM: &bkv1.IAMAccessProvider{Endpoint: srv.IAMEndpoint}}
		if srv.Kind == testenv.MinIO {
			s.Spec.AccessProvider.IAM = &bkv1.IAMAccessProvider{API: bkv1.IAMAPIMinIO}
		}
	}
}

// iamAPIOf is the API through which the operator reaches srv's users.
func iamAPIOf(srv *testenv.S3Server) iam.API {
	if srv.Kind == testenv.MinIO {
		return iam.APIMinIO
	}
	return iam.APIAWS
}

// adminIAM reaches srv's users as its admin, as the operator does.
func adminIAM(srv *testenv.S3Server) iam.Config {
	if srv.Kind == testenv.MinIO {
		return iam.Config{API: iam.APIMinIO, Endpoint: srv.Endpoint, Region: srv.Region, AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey}
	}
	return iam.Config{Endpoint: srv.IAMEndpoint, Region: srv.IAMRegion, AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey}
}

// issuedUser is the user the operator issued the access's key to on its store.
func issuedUser(ba *bkv1.BucketAccess) string {
	if ba.Status.IdentityName != "" {
		return ba.Status.IdentityName
	}
	return iam.UserName(killClusterID, string(ba.UID))
}

// userFrozen says whether user's policy carries a move's freeze (iam.FreezeSid).
func userFrozen(ctx context.Context, d iam.Driver, user string) error {
	editor, ok := iam.PolicyEditorOf(d)
	if !ok {
		return fmt.Errorf("the driver edits no user's policy")
	}
	policy, err := editor.UserPolicy(ctx, user)
	if err != nil || !strings.Contains(policy, iam.FreezeSid) {
		return fmt.Errorf("user %s not frozen yet (%v): %s", user, err, policy)
	}
	return nil
}

// killable is the operator's binary, one process at a time, that the test kills with
// SIGKILL and starts again. Its cleanup is registered before the fixtures', so the
// last process still runs while they delete their claims.
type killable struct {
	t                    *testing.T
	bin, kubeconfig, dir string
	args                 []string
	cur                  *binary
	kills                int
	began                time.Time
}

func startKillable(t *testing.T, bin, kubeconfig, dir string, args ...string) *killable {
	t.Helper()
	k := &killable{t: t, bin: bin, kubeconfig: kubeconfig, dir: dir, args: args, began: time.Now()}
	k.start()
	t.Cleanup(func() { k.cur.stop(t) })
	return k
}

func (k *killable) start() {
	k.cur = launchBinary(k.t, k.bin, k.kubeconfig, filepath.Join(k.dir, fmt.Sprintf("operator-%d.log", k.kills)), k.args...)
}

// killWhen watches cond closely (a point of a move can last a second) and, once it
// holds, kills the operator with SIGKILL and starts a new one.
func (k *killable) killWhen(point string, cond func() error) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	err := cond()
	for err != nil {
		select {
		case <-ctx.Done():
			k.t.Fatalf("the move never reached the point %q: %v", point, err)
		case <-time.After(25 * time.Millisecond):
		}
		if k.cur.Exited() {
			k.t.Fatalf("the operator (PID %d) exited by itself before %q: %v", k.cur.PID(), point, k.cur.Err())
		}
		err = cond()
	}
	pid := k.cur.PID()
	k.cur.Kill()
	k.kills++
	k.t.Logf("SIGKILL %d, %s: PID %d, %s into the test", k.kills, point, pid, time.Since(k.began).Round(time.Second))
	k.start()
}
