package mover_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/mover"
)

// TestSourceOutageMidCopy stops the source store in the middle of a pass and starts
// it again: the mover waits it out, retrying with backoff, and the pass ends verified
// with every object on the target.
func TestSourceOutageMidCopy(t *testing.T) {
	objs := mixedObjects("outage", 400, []object{{key: "a/10mib.bin", size: 10 << 20, partSize: 5 << 20}})
	src, tgt := newBucket(t, seaweed, false), newBucket(t, rgw, false)
	src.putAll(t, objs)
	f := newMove(t, src, tgt, mover.VersionsCurrent)
	// A small budget on the source stretches the pass over seconds: room to stop the
	// store in its middle.
	f.spec.Source.RequestsPerSecond, f.spec.Source.Burst = 50, 1
	f.start(mover.ModeFinal, 1)
	eventually(t, time.Minute, "a quarter of the objects copied", func() error {
		cp, err := checkpoints().Load(context.Background(), f.id, 0)
		if err != nil || cp == nil || cp.Counts.CopiedObjects < 100 {
			return fmt.Errorf("not yet (%v)", err)
		}
		return nil
	})
	if err := seaweed.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	eventually(t, time.Minute, "the mover to find the source closed", func() error {
		if n := f.requests.get("source"); n < 3 {
			return fmt.Errorf("%d unanswered requests", n)
		}
		return nil
	})
	if err := seaweed.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("source down for %s; %d requests went unanswered", time.Since(stopped).Round(time.Millisecond), f.requests.get("source"))
	p := waitPass(t, f.runner, f.id, 1, 1, 3*time.Minute)
	if !p.Verified || p.Failures.Count != 0 {
		t.Fatalf("after the outage: verified %v, failures %s, differences %s", p.Verified, p.Failures, p.Differences)
	}
	expectObjects(t, tgt, objs)
}
