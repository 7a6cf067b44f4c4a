package storagebucket

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// countingFreezer is a keyFreezer that counts its calls.
type countingFreezer struct{ freezes, thaws int }

func (f *countingFreezer) freeze(context.Context, *bkv1.StorageBucket, string) error {
	f.freezes++
	return nil
}

func (f *countingFreezer) thaw(context.Context, *bkv1.StorageBucket, string) error {
	f.thaws++
	return nil
}

func (f *countingFreezer) unstopped() string { return "keys made by hand are not frozen" }

// cutoverRig is a claim whose move cuts over from src to dst, with its source bucket
// on a fake store and the operator's clock in the test's hand.
type cutoverRig struct {
	r     *Reconciler
	clk   *clocktesting.FakeClock
	s3    *fakeS3
	scope *bucketScope
	fz    *countingFreezer
}

func newCutoverRig(t *testing.T) *cutoverRig {
	t.Helper()
	q := newQueueRig(t, "a")
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	q.r.Clock, q.r.Recorder, q.r.SyncInterval = clk, events.NewFakeRecorder(1000), time.Hour
	sb := q.claims["a"].DeepCopy()
	c := &fakeS3{}
	scope := &bucketScope{sb: sb, s3: c, bucket: "b", store: q.src,
		patcher: reconcile.NewStatusPatcher(nil, sb, func(sb *bkv1.StorageBucket) any { return sb.Status }, nil)}
	return &cutoverRig{r: q.r, clk: clk, s3: c, scope: scope, fz: &countingFreezer{}}
}

// cutOver puts the move into a cutover, frozen, as finalPass does before its first pass.
func (g *cutoverRig) cutOver(t *testing.T) *bkv1.MoveStatus {
	t.Helper()
	m := g.scope.sb.Status.Move
	m.Phase = bkv1.MoveCuttingOver
	if err := g.r.freezeSource(context.Background(), g.scope); err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(g.clk.Now())
	m.FrozenAt, m.CutoverPass, m.CutoverRetryAt = &now, m.Pass, nil
	return m
}

// unequal is a final pass that found keys written on the source under the freeze.
var unequal = mover.Progress{Differences: mover.Failures{Count: 2, First: []mover.Failure{{Key: "written/1"}, {Key: "written/2"}}}}

// TestWritesUnderTheFreezeBackOff: final passes that never find both sides equal (a
// writer the store's freeze does not stop) run MoveMaxFinalPasses times, each after
// the keys are frozen again; then the freeze is lifted from the bucket policy and the
// keys, the move gives its slot back and says WritesDuringFreeze, naming the keys the
// freeze does not stop and when it tries again; until then it waits without a pass,
// and each cutover written under the freeze doubles the wait, up to
// MoveCutoverRetryMax: in a day of a writer that never stops, a few dozen passes run,
// not one after another.
func TestWritesUnderTheFreezeBackOff(t *testing.T) {
	ctx := context.Background()
	g := newCutoverRig(t)
	m := g.scope.sb.Status.Move
	m.Pass = 5
	g.cutOver(t)
	for i := 1; i < defaults.MoveMaxFinalPasses; i++ {
		step := g.r.judgeFinalPass(ctx, g.scope, &moveTargetScope{bucket: g.scope.bucket}, m, g.fz, unequal)
		if step.err != nil || m.Phase != bkv1.MoveCuttingOver || m.FrozenAt == nil || g.fz.freezes != i {
			t.Fatalf("unverified final pass %d: %+v, phase %s, frozen %v, keys frozen %d times", i, step.err, m.Phase, m.FrozenAt, g.fz.freezes)
		}
	}
	if !strings.Contains(g.s3.policy, bkv1.MoveFreezeSid) {
		t.Fatalf("the source's policy %q lost its freeze during the cutover", g.s3.policy)
	}
	step := g.r.judgeFinalPass(ctx, g.scope, &moveTargetScope{bucket: g.scope.bucket}, m, g.fz, unequal)
	if step.err == nil || step.err.Reason != bkv1.ReasonWritesDuringFreeze || !step.err.Terminal {
		t.Fatalf("after %d unverified final passes: %+v, want %s", defaults.MoveMaxFinalPasses, step.err, bkv1.ReasonWritesDuringFreeze)
	}
	for _, want := range []string{"writes continued during the freeze", g.fz.unstopped(), "written/1", "2026-03-01T12:01:00Z"} {
		if !strings.Contains(step.err.Message, want) {
			t.Errorf("condition message %q does not say %q", step.err.Message, want)
		}
	}
	if g.s3.policy != "" || g.fz.thaws != 1 || m.FrozenAt != nil {
		t.Errorf("after the cutover: source policy %q, keys thawed %d times, frozenAt %v; want the freeze lifted everywhere", g.s3.policy, g.fz.thaws, m.FrozenAt)
	}
	if m.Phase != bkv1.MoveQueued || m.CutoverAttempts != 1 || step.requeue != defaults.MoveCutoverRetry ||
		!m.CutoverRetryAt.Time.Equal(g.clk.Now().Add(defaults.MoveCutoverRetry)) {
		t.Errorf("after the cutover: phase %s, attempts %d, retry at %v, requeue %s", m.Phase, m.CutoverAttempts, m.CutoverRetryAt, step.requeue)
	}

	// Until the retry, every look waits and says why; then the move is admitted again.
	g.clk.Step(defaults.MoveCutoverRetry - time.Second)
	if step, wait := g.r.cutoverWait(ctx, g.scope, m); !wait || step.requeue != time.Second || step.err == nil || step.err.Reason != bkv1.ReasonWritesDuringFreeze {
		t.Errorf("a second before the retry: wait %v, %+v", wait, step)
	}
	g.clk.Step(time.Second)
	if _, wait := g.r.cutoverWait(ctx, g.scope, m); wait {
		t.Error("the move still waits at its retry time")
	}

	// A writer that never stops: the waits double up to their bound.
	passes, cutovers := defaults.MoveMaxFinalPasses, 1
	end := g.clk.Now().Add(24 * time.Hour)
	var last time.Duration
	limit := 24*60/int(defaults.MoveCutoverRetryMax/time.Minute) + 10
	for g.clk.Now().Before(end) {
		m.Pass++ // the catch-up pass admitMove starts
		g.clk.Step(defaults.MovePollInterval)
		g.cutOver(t)
		if cutovers++; cutovers > limit {
			t.Fatalf("%d cutovers (%d final passes) in %s", cutovers, passes, g.clk.Now().Sub(end.Add(-24*time.Hour)))
		}
		for {
			passes++
			g.clk.Step(defaults.MovePollInterval)
			step := g.r.judgeFinalPass(ctx, g.scope, &moveTargetScope{bucket: g.scope.bucket}, m, g.fz, unequal)
			if step.err == nil {
				continue
			}
			last = step.requeue
			break
		}
		for {
			step, wait := g.r.cutoverWait(ctx, g.scope, m)
			if !wait {
				break
			}
			if step.requeue <= 0 {
				t.Fatalf("a wait of %s", step.requeue)
			}
			g.clk.Step(step.requeue)
		}
	}
	if last != defaults.MoveCutoverRetryMax || cutoverBackoff(2) != 2*defaults.MoveCutoverRetry {
		t.Errorf("the last wait %s, the second %s; want the bound %s and twice %s", last, cutoverBackoff(2), defaults.MoveCutoverRetryMax, defaults.MoveCutoverRetry)
	}
	if int(m.CutoverAttempts) != cutovers || g.fz.thaws != cutovers {
		t.Errorf("attempts %d, keys thawed %d times, after %d cutovers", m.CutoverAttempts, g.fz.thaws, cutovers)
	}
	t.Logf("%d cutovers, %d final passes in a day of writes under the freeze", cutovers, passes)

	// A cutover that verifies switches the home, whatever came before.
	g.cutOver(t)
	if step := g.r.judgeFinalPass(ctx, g.scope, &moveTargetScope{bucket: g.scope.bucket}, m, g.fz, mover.Progress{Verified: true}); step.err != nil || m.Phase != bkv1.MoveSwitching {
		t.Errorf("a verified final pass: %+v, phase %s", step.err, m.Phase)
	}
}
