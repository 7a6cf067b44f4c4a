package integration_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestPacedMoveResumesAfterTheOperatorStops stops the operator twice during a move
// from SeaweedFS to Ceph RGW: mid-copy, and right after it froze the source's writes
// for the cutover (before any status of the cutover was written). Each next operator
// reads where the move is from status and the checkpoints and carries on: the move
// ends Done with every object equal, having written at most 1.2 times the bucket's
// bytes.
func TestPacedMoveResumesAfterTheOperatorStops(t *testing.T) {
	f := newFixture(t, seaweed)
	target := f.storeOn(rgw, func(s *bkv1.ObjectStore) { s.Spec.RequestsPerSecond, s.Spec.Burst = 20, 20 })
	frozen := make(chan struct{})
	var once sync.Once
	signalFreeze := func(ctx context.Context, cfg s3.Config) (s3.Client, error) {
		c, err := s3.New(ctx, cfg)
		return freezeSignal{Client: c, once: &once, frozen: frozen}, err
	}
	start := func() (stop func()) {
		ctx, cancel := context.WithCancel(f.ctx)
		done, err := startManager(ctx, operator.Options{WatchLabelSelector: isolatedLabel + "=" + f.ns, MoverNamespace: moverNamespace, S3Factory: signalFreeze})
		must(t, err)
		return func() { cancel(); <-done }
	}

	stop := start()
	sb := f.waitCondition(f.bucket("data", func(sb *bkv1.StorageBucket) { sb.Labels = map[string]string{isolatedLabel: f.ns} }),
		bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := sb.Status.BucketName
	seeded := f.seedObjects(f.admin, bucket, 200)
	tgtAdmin := adminOf(t, f.ctx, rgw)
	f.moveTo(sb, target, "")
	f.waitMove(sb, bkv1.MoveCopying, time.Minute)
	f.eventually(time.Minute, "objects arriving on the target", func() error {
		page, err := tgtAdmin.ListObjectVersions(f.ctx, bucket, nil)
		if err != nil || len(page.Versions) < 20 {
			return fmt.Errorf("%d so far (%v)", len(page.Versions), err)
		}
		return nil
	})
	stop()
	t.Logf("stopped mid-copy: %+v", f.get(sb).Status.Move)

	stop = start()
	select {
	case <-frozen:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the second operator never froze the source: %+v", f.get(sb).Status.Move)
	}
	stop()
	t.Logf("stopped at the freeze: %+v", f.get(sb).Status.Move)

	stop = start()
	defer stop()
	done := f.waitMovedOnce(sb, tgtAdmin, seeded, "done")
	// Only the isolated manager sees the claim: it finishes its deletion too.
	must(t, k8s.Delete(f.ctx, done))
	f.waitGone(done)
}

// TestPacedMoveWaitsOutASourceOutage stops the source store, a Versity server of the
// test's own, in the middle of a move's copy to Ceph RGW. While it is down the move
// neither cuts over nor gives up: its claim reports the store's outage, and the target
// keeps what was copied. Once the source is back the move carries on from its
// checkpoints and ends Done with every object equal, having written at most 1.2 times
// the bucket's bytes.
func TestPacedMoveWaitsOutASourceOutage(t *testing.T) {
	t.Parallel() // mostly waiting on the paced copy: see the package doc in suite_test.go
	src := testenv.NewS3(t, testenv.Versity)
	f := newFixture(t, src, func(s *bkv1.ObjectStore) { s.Spec.RequestsPerSecond, s.Spec.Burst = 20, 20 })
	target := f.storeOn(rgw)
	sb := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := sb.Status.BucketName
	seeded := f.seedObjects(f.admin, bucket, 200)
	tgtAdmin := adminOf(t, f.ctx, rgw)
	f.moveTo(sb, target, "")
	f.waitMove(sb, bkv1.MoveCopying, time.Minute)
	copied := func() (int, error) {
		page, err := tgtAdmin.ListObjectVersions(f.ctx, bucket, nil)
		return len(page.Versions), err
	}
	f.eventually(time.Minute, "objects arriving on the target", func() error {
		if n, err := copied(); err != nil || n < 20 {
			return fmt.Errorf("%d so far (%v)", n, err)
		}
		return nil
	})

	must(t, src.Stop())
	f.eventually(time.Minute, "the claim to report its store down", func() error {
		got := f.get(sb)
		if c := findCond(got, bkv1.ConditionAvailable); c == nil || c.Status == metav1.ConditionTrue {
			return fmt.Errorf("conditions: %s", describe(got.Status.Conditions))
		}
		return nil
	})
	during := f.get(sb)
	if m := during.Status.Move; m == nil || m.Phase != bkv1.MoveCopying || during.Status.ObjectStore != f.store {
		t.Fatalf("during the source's outage: objectStore %q, move %+v; want it still copying from %s", during.Status.ObjectStore, during.Status.Move, f.store)
	}
	held, err := copied()
	must(t, err)
	t.Logf("source down with %d objects on the target: %s", held, describe(during.Status.Conditions))

	must(t, src.Start())
	f.waitMovedOnce(sb, tgtAdmin, seeded, "done after the outage")
}

// waitMovedOnce waits for sb's move to be Done and checks that every seeded object is
// equal on the target (read with tgt) and that the move copied at most 1.2 times the
// bucket's bytes, whatever stopped it on the way.
func (f *fixture) waitMovedOnce(sb *bkv1.StorageBucket, tgt s3.Client, seeded map[string][32]byte, what string) *bkv1.StorageBucket {
	f.t.Helper()
	done := f.waitMove(sb, bkv1.MoveDone, 3*time.Minute)
	m := done.Status.Move
	f.t.Logf("%s: %d objects, %d of %d bytes copied, write pause %s", what, m.CopiedObjects, m.CopiedBytes, m.TotalBytes, m.WritePause.Duration)
	if float64(m.CopiedBytes) > 1.2*float64(m.TotalBytes) {
		f.t.Errorf("copied %d bytes of a %d-byte bucket: more than 1.2 times", m.CopiedBytes, m.TotalBytes)
	}
	for key, sum := range seeded {
		if body, err := tgt.GetObject(f.ctx, done.Status.BucketName, key, 1<<20); err != nil || sha256Of(body) != sum {
			f.t.Fatalf("object %s on the target: %v", key, err)
		}
	}
	return done
}

// freezeSignal closes frozen once the operator has frozen a source's writes.
type freezeSignal struct {
	s3.Client
	once   *sync.Once
	frozen chan struct{}
}

func (c freezeSignal) PutBucketPolicy(ctx context.Context, bucket, policy string) error {
	err := c.Client.PutBucketPolicy(ctx, bucket, policy)
	if err == nil && strings.Contains(policy, bkv1.MoveFreezeSid) {
		c.once.Do(func() { close(c.frozen) })
	}
	return err
}

// TestMoveEveryVersion moves a versioned bucket from Ceph RGW to SeaweedFS with
// spec.move.versions All: every key's history (versions and delete markers, in order)
// is the same on the target, and its current content. With deleteSourceAfter, the
// source bucket is deleted, every version, after the grace.
func TestMoveEveryVersion(t *testing.T) {
	f := newFixture(t, rgw)
	target := f.storeOn(seaweed)
	f.waitNamedStoreCondition(target, bkv1.ConditionReady, metav1.ConditionTrue, "")
	sb := f.waitCondition(f.bucket("data", func(sb *bkv1.StorageBucket) { sb.Spec.Versioning = bkv1.VersioningEnabled }),
		bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := sb.Status.BucketName
	for i := range 3 {
		must(t, f.admin.PutObject(f.ctx, bucket, "history", fmt.Appendf(nil, "v%d", i)))
	}
	must(t, f.admin.DeleteObject(f.ctx, bucket, "history"))
	must(t, f.admin.PutObject(f.ctx, bucket, "kept", []byte("first")))
	must(t, f.admin.PutObject(f.ctx, bucket, "kept", []byte("last")))
	must(t, f.admin.PutObject(f.ctx, bucket, "gone", []byte("x")))
	must(t, f.admin.DeleteObject(f.ctx, bucket, "gone"))

	srcHistory := historyOf(t, f, f.admin, bucket)
	f.update(k8s, sb, func() {
		sb.Spec.Move = &bkv1.MoveSpec{Versions: bkv1.MoveVersionsAll, DeleteSourceAfter: &metav1.Duration{Duration: 2 * time.Second}}
		sb.Spec.ObjectStoreRef.Name = target
	})
	tgtAdmin := adminOf(t, f.ctx, seaweed)
	f.waitMove(sb, bkv1.MoveDone, 2*time.Minute)
	if tgt := historyOf(t, f, tgtAdmin, bucket); srcHistory != tgt {
		t.Errorf("histories differ:\nsource %s\ntarget %s", srcHistory, tgt)
	}
	if body, err := tgtAdmin.GetObject(f.ctx, bucket, "kept", 100); err != nil || string(body) != "last" {
		t.Errorf("kept on the target: %q, %v", body, err)
	}
	if _, err := tgtAdmin.GetObject(f.ctx, bucket, "history", 100); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("history, deleted last, on the target: %v", err)
	}

	// spec.move.deleteSourceAfter: the source goes, every version with it, after the
	// grace; the bucket stays on its new store.
	f.eventually(time.Minute, "the source deleted after the grace", func() error {
		if m := f.get(sb).Status.Move; !m.SourceDeleted {
			return fmt.Errorf("move %+v", m)
		}
		return nil
	})
	if _, err := f.admin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("the source bucket after deleteSourceAfter: %v, want it gone", err)
	}
	if _, err := tgtAdmin.HeadBucket(f.ctx, bucket); err != nil {
		t.Errorf("the moved bucket on its new store: %v", err)
	}
	if ev := f.eventReasons(sb); ev[bkv1.ReasonMoving] == 0 || ev[bkv1.ReasonMoved] < 2 {
		t.Errorf("events %v: want Moving at each phase, Moved for the move and for the source's deletion", ev)
	}
	f.waitKstatus("StorageBucket", client.ObjectKeyFromObject(sb), "Current")
}

// historyOf writes each key's versions, newest first, as V (a version) and D (a
// delete marker).
func historyOf(t *testing.T, f *fixture, c s3.Client, bucket string) string {
	t.Helper()
	var b strings.Builder
	var page *s3.PageToken
	for {
		p, err := c.ListObjectVersions(f.ctx, bucket, page)
		must(t, err)
		for _, v := range p.Versions {
			kind := "V"
			if v.IsDeleteMarker {
				kind = "D"
			}
			fmt.Fprintf(&b, "%s:%s ", v.Key, kind)
		}
		if page = p.Next; page == nil {
			return b.String()
		}
	}
}
