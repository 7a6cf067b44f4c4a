package mover_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/mover"
)

// TestCancelledPassResumes stops a pass in the middle (the runner's Cancel, as a
// shutting-down operator or a deleted Job pod does) while objects are in flight, and
// starts the same pass again: it resumes from the checkpoint's cursor and ends
// verified. The keys whose copy was cut short stay before the cursor, so the resumed
// pass copies them instead of stepping over them.
func TestCancelledPassResumes(t *testing.T) {
	objs := mixedObjects("cancel", 300, nil)
	src, tgt := newBucket(t, seaweed, false), newBucket(t, rgw, false)
	src.putAll(t, objs)
	f := newMove(t, src, tgt, mover.VersionsCurrent)
	// A small budget on the target keeps every worker waiting on a write: the cancel
	// cuts all of them short.
	f.spec.Target.RequestsPerSecond, f.spec.Target.Burst = 40, 1
	f.start(mover.ModeFinal, 1)
	var cursor string
	eventually(t, time.Minute, "a third of the objects copied", func() error {
		cp, err := checkpoints().Load(context.Background(), f.id, 0)
		if err != nil || cp == nil || cp.Counts.CopiedObjects < 100 {
			return fmt.Errorf("not yet (%v)", err)
		}
		cursor = cp.Cursor
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.runner.Cancel(ctx, f.id); err != nil {
		t.Fatal(err)
	}
	cp, err := checkpoints().Load(ctx, f.id, 0)
	if err != nil || cp == nil || cp.Phase == mover.PhaseDone {
		t.Fatalf("after the cancel: %+v, %v; want a pass stopped in its middle", cp, err)
	}
	t.Logf("cancelled at cursor %q (%d copied); resuming", cp.Cursor, cp.Counts.CopiedObjects)
	if cp.Cursor < cursor {
		t.Errorf("the cursor went back from %q to %q", cursor, cp.Cursor)
	}
	f.start(mover.ModeFinal, 1)
	p := waitPass(t, f.runner, f.id, 1, 1, 3*time.Minute)
	if !p.Verified {
		t.Fatalf("resumed pass not verified: differences %s, failures %s", p.Differences, p.Failures)
	}
	expectObjects(t, tgt, objs)
}
