package e2e_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// acquired is client-go's leader-election log line ("Successfully acquired lease" in
// current versions, lower case in older ones).
var acquired = regexp.MustCompile(`(?i)successfully acquired lease`)

// TestFailoverWithBinary runs two replicas of the real binary, kills the leader with
// SIGKILL (no lease release, as when a node dies) and checks that the other takes over
// within the lease duration and carries on: probes on request, no bucket created twice,
// new claims served.
func TestFailoverWithBinary(t *testing.T) {
	dir := t.TempDir()
	bin, kubeconfig := buildOperator(t, dir)
	leaderElect := []string{"--leader-elect", "--leader-election-namespace", "default"}
	a := startBinary(t, bin, kubeconfig, filepath.Join(dir, "a.log"), leaderElect...)
	b := startBinary(t, bin, kubeconfig, filepath.Join(dir, "b.log"), leaderElect...)
	f := newFixture(t, "")

	const n = 20
	var sbs []*bkv1.StorageBucket
	for i := range n {
		sbs = append(sbs, f.bucket(fmt.Sprintf("fo-%02d", i), nil))
	}
	for _, sb := range sbs {
		f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, "", 3*time.Minute)
		f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded, 2*time.Minute)
	}

	var leader, survivor *binary
	f.eventually(30*time.Second, "exactly one replica to hold the lease", func() error {
		la, lb := a.logHas(acquired), b.logHas(acquired)
		switch {
		case la && !lb:
			leader, survivor = a, b
		case lb && !la:
			leader, survivor = b, a
		default:
			return fmt.Errorf("lease acquired: a=%v b=%v", la, lb)
		}
		return nil
	})
	t.Logf("leader is PID %d (%s), killing it with SIGKILL", leader.PID(), filepath.Base(leader.log))
	killed := time.Now()
	leader.Kill()
	f.eventually(60*time.Second, "the surviving replica to acquire the lease", func() error {
		if !survivor.logHas(acquired) {
			return errors.New("not yet")
		}
		return nil
	})
	takeover := time.Since(killed)
	t.Logf("takeover after %.1fs", takeover.Seconds())

	resumed := time.Now()
	// Probes continue. lastProbeTime does not move on a healthy bucket (status economy),
	// so ask for probes and wait until the new leader has handled them.
	requested := strconv.FormatInt(time.Now().UnixNano(), 10)
	for _, sb := range sbs[:3] {
		patch := client.MergeFrom(sb.DeepCopy())
		sb.Annotations = map[string]string{bkv1.AnnotationProbeRequestedAt: requested}
		must(t, k8s.Patch(f.ctx, sb, patch))
	}
	for _, sb := range sbs[:3] {
		got := &bkv1.StorageBucket{}
		f.eventually(30*time.Second, "the new leader to handle the probe request on "+sb.Name, func() error {
			must(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), got))
			if got.Status.LastHandledProbeRequest != requested {
				return fmt.Errorf("lastHandledProbeRequest=%q, want %q; %s", got.Status.LastHandledProbeRequest, requested, testenv.DescribeConditions(got.Status.Conditions))
			}
			return nil
		})
	}

	// Every claim still has exactly one bucket on the server: neither replica created
	// a second one around the handover.
	claims, err := f.claimedBuckets()
	must(t, err)
	if len(claims) != n {
		t.Errorf("%d claims of %s have buckets on SeaweedFS, want %d: %v", len(claims), f.ns, n, claims)
	}
	for _, sb := range sbs {
		if buckets := claims[f.ns+"/"+sb.Name]; len(buckets) != 1 {
			t.Errorf("claim %s/%s has buckets %v on SeaweedFS, want exactly one", f.ns, sb.Name, buckets)
		}
	}

	// A claim made after the failover is served by the new leader.
	late := f.bucket("fo-after-failover", nil)
	f.waitCondition(late, bkv1.ConditionReady, metav1.ConditionTrue, "", 30*time.Second)
	// How long that took is the benchmark's subject (the failover scenario), not this
	// test's: a loaded machine may be slow, and the deadlines above are only how long
	// to wait before calling it a failure.
	t.Logf("the new leader served probes and a new claim %s after the takeover", time.Since(resumed).Round(time.Second))
	if survivor.Exited() {
		t.Fatalf("the surviving replica exited; log tail:\n%s", testenv.Tail(survivor.logText(), 4000))
	}
	// The fixture's cleanup deletes the 21 claims while the survivor still runs: its
	// t.Cleanup was registered after startBinary's, so it runs first.
}
