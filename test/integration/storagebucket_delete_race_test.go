package integration_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestDeletedDuringFirstPassLeavesNoBucket: claims with deletionPolicy Delete, each
// deleted in the midst of its first pass (schedule): before the finalizer, racing it
// (the API server may then remove the claim although it reported the finalizer added,
// kubernetes/kubernetes#77988), between the create intent and CreateBucket, between
// CreateBucket and the tags, or after. Once every claim is gone, no bucket of theirs is
// left on the store, tagged or not, and every deletion said what it decided. A second
// round removes each claim's finalizers as well, right after they or the create intent
// appeared: the claims go without their deletion pass, as when the API server lets a
// deletion race the finalizer (kubernetes/kubernetes#77988, the likeliest cause of a
// leak among claims deleted with no delay at all), and their policy is carried out all
// the same.
func TestDeletedDuringFirstPassLeavesNoBucket(t *testing.T) {
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, server)
			waitStore(f, bkv1.ReasonReady)
			early := f.deleteRound("early", 30, schedule(30))
			f.deletionsAnnounced(early)
			f.noBucketLeft(early)

			stripped := f.deleteRound("stripped", 12, stripped)
			f.deletionsAnnounced(stripped)
			f.noBucketLeft(stripped)
		})
	}
}

// TestDeletedDuringFirstPassWithStoreFaults: the same race, with a fault injected
// where the deletion is most fragile, on SeaweedFS behind a proxy, served by a manager
// of its own with a short S3 deadline:
//   - CreateBucket answered late, close to the deadline;
//   - CreateBucket unanswered (the operator gives up), and carried out by the store
//     right after the operator's next look at the bucket: a deletion that took "not
//     there" for "nothing to delete" would leave it behind;
//   - the first tag read after the bucket was found fails once;
//   - CreateBucket carried out by the store and answered 500 all the same (a retry
//     would meet the bucket and read it as someone else's);
//   - the manager's cache of StorageBuckets lags the status it writes;
//   - the claim goes without its deletion pass, its finalizer removed right after it
//     appeared or right after the create intent did, while a slow CreateBucket is in
//     flight: as the API server does when a deletion races the finalizer
//     (kubernetes/kubernetes#77988), and as a tenant may.
//
// Each round ends with every claim gone, no bucket of theirs on the store, and every
// created bucket's deletion announced.
func TestDeletedDuringFirstPassWithStoreFaults(t *testing.T) {
	const deadline = 2 * time.Second
	cases := []struct {
		name   string
		inject func(*stallProxy)
		lag    time.Duration
		when   func(int) deletion // default schedule(12)
		// happened says whether the fault was met (landed and failed requests), so
		// that a round that never met it does not pass for proof.
		happened func(landed, failed int) bool
	}{
		{name: "CreateBucket answered late", inject: func(p *stallProxy) { p.slowFirst(isCreateBucket, deadline*3/4) }},
		{name: "CreateBucket unanswered and carried out late", inject: func(p *stallProxy) { p.landLate(isCreateBucket) },
			happened: func(landed, _ int) bool { return landed > 0 }},
		{name: "tag read fails once", inject: func(p *stallProxy) { p.failOnceSeen(isGetBucketTagging) },
			happened: func(_, failed int) bool { return failed > 0 }},
		{name: "CreateBucket carried out and answered 500", inject: func(p *stallProxy) { p.failAfter(isCreateBucket) },
			happened: func(_, failed int) bool { return failed > 0 }, when: afterVerdicts},
		{name: "cache lags the status writes", lag: 300 * time.Millisecond},
		{name: "claim gone without its deletion pass", inject: func(p *stallProxy) { p.slowFirst(isCreateBucket, deadline/2) },
			when: stripped},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			proxy := newStallProxy(t, seaweed.Endpoint)
			f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) { s.Spec.Endpoint = proxy.URL })
			waitStore(f, bkv1.ReasonReady)
			restCfg := rest.CopyConfig(cfg)
			if tc.lag > 0 {
				restCfg.Wrap(lagWatches(tc.lag))
			}
			ctx, stop := context.WithCancel(context.Background())
			done, err := startManagerOn(ctx, restCfg, operator.Options{WatchLabelSelector: isolatedLabel + "=" + f.ns,
				S3RequestTimeout: deadline, CreateSettleTime: deadline})
			if err != nil {
				stop()
				t.Fatal(err)
			}
			t.Cleanup(func() { removeIsolated(t, f); stop(); <-done })
			isolated := func(sb *bkv1.StorageBucket) { sb.Labels = map[string]string{isolatedLabel: f.ns} }
			// A first claim, provisioned and deleted before the faults, proves the
			// manager's cache and store client ready: the round's claims then meet a
			// pass within their first milliseconds.
			warm := f.bucket("warm-up", isolated, func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete })
			f.waitCondition(warm, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
			must(t, k8s.Delete(f.ctx, warm))
			f.waitGone(warm)
			if tc.inject != nil {
				tc.inject(proxy)
			}

			when := schedule(12)
			if tc.when != nil {
				when = tc.when
			}
			round := f.deleteRound("faulty", 12, when, isolated)
			f.deletionsAnnounced(round)
			f.noBucketLeft(round)
			if landed, failed := proxy.faults(); tc.happened != nil && !tc.happened(landed, failed) {
				t.Errorf("the fault was never met (%d late requests landed, %d failed): the round proves nothing", landed, failed)
			}
		})
	}
}

// lagWatches delays what a manager's watches of StorageBuckets deliver by lag: its
// cache holds each claim as it was up to lag earlier, its own status writes included.
func lagWatches(lag time.Duration) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(req)
			if err == nil && req.URL.Query().Get("watch") == "true" && strings.HasSuffix(req.URL.Path, "/storagebuckets") {
				resp.Body = &laggingBody{ReadCloser: resp.Body, lag: lag}
			}
			return resp, err
		})
	}
}

// laggingBody hands on what it reads lag after it arrived.
type laggingBody struct {
	io.ReadCloser
	lag time.Duration
}

func (b *laggingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		time.Sleep(b.lag) // the fault itself: the watch delivers this late
	}
	return n, err
}

// deletion says when a round deletes a claim: d after the moment anchor names; strip
// removes its finalizers then, so that the claim goes without its deletion pass.
type deletion struct {
	anchor anchor
	d      time.Duration
	strip  bool
}

// afterVerdicts deletes claim i 0 to 50 ms after its pass reached Ready or Stalled:
// once whatever the pass made of an unclear answer is on record.
func afterVerdicts(i int) deletion {
	return deletion{anchor: afterVerdict, d: time.Duration(i%6) * 10 * time.Millisecond}
}

// stripped deletes claim i and removes its finalizers the moment its finalizer (even
// i) or its create intent (odd i) appears.
func stripped(i int) deletion {
	return deletion{anchor: []anchor{afterFinalizer, afterIntent}[i%2], strip: true}
}

// anchor is a moment of a claim's first pass, as a watch of the claim sees it: a loaded
// machine may take longer than any fixed delay after the creation to reach the claim
// at all, or to reach the store.
type anchor int

const (
	afterCreation  anchor = iota
	afterFinalizer        // the pass has begun
	afterIntent           // CreateBucket is being sent
	afterVerdict          // the pass reached Ready or Stalled
	gone                  // the watch saw the claim removed
)

// schedule deletes a third of the n claims of a round 0 to 500 ms after their creation,
// evenly (wherever the first pass is at some moment of that time, some claim's deletion
// lands there), a third 0 to 50 ms after their finalizer appeared, and a third 0 to 50
// ms after their create intent appeared.
func schedule(n int) func(int) deletion {
	return func(i int) deletion {
		if a := anchor(i % 3); a != afterCreation {
			return deletion{anchor: a, d: time.Duration(i/3%6) * 10 * time.Millisecond}
		}
		return deletion{d: time.Duration(i) * 500 * time.Millisecond / time.Duration(n)}
	}
}

// reached watches the namespace's StorageBuckets and returns, per anchor and claim name,
// a channel closed when the claim reaches that moment.
func (f *fixture) reached(names []string) map[anchor]map[string]chan struct{} {
	f.t.Helper()
	out := map[anchor]map[string]chan struct{}{afterFinalizer: {}, afterIntent: {}, afterVerdict: {}, gone: {}}
	for _, chans := range out {
		for _, n := range names {
			chans[n] = make(chan struct{})
		}
	}
	w, err := k8sWatch.Watch(f.ctx, &bkv1.StorageBucketList{}, client.InNamespace(f.ns))
	must(f.t, err)
	f.t.Cleanup(w.Stop)
	go func() {
		closed := map[anchor]map[string]bool{afterFinalizer: {}, afterIntent: {}, afterVerdict: {}, gone: {}}
		for ev := range w.ResultChan() {
			sb, ok := ev.Object.(*bkv1.StorageBucket)
			if !ok || out[afterFinalizer][sb.Name] == nil {
				continue
			}
			at := map[anchor]bool{afterFinalizer: slices.Contains(sb.Finalizers, bkv1.Finalizer), afterIntent: sb.Status.CreateIntent != nil,
				afterVerdict: meta.IsStatusConditionTrue(sb.Status.Conditions, bkv1.ConditionReady) || meta.IsStatusConditionTrue(sb.Status.Conditions, bkv1.ConditionStalled),
				gone:         ev.Type == watch.Deleted}
			for a, yes := range at {
				if yes && !closed[a][sb.Name] {
					closed[a][sb.Name] = true
					close(out[a][sb.Name])
				}
			}
		}
	}()
	return out
}

// round is what a deleteRound did: its claims, and those whose create intent the watch
// saw (a CreateBucket was sent for them).
type round struct {
	claims   []*bkv1.StorageBucket
	intended map[string]bool
}

// deleteRound creates n claims with deletionPolicy Delete, named prefix-0 to prefix-n-1,
// deletes claim i when(i), and waits until every one is gone.
func (f *fixture) deleteRound(prefix string, n int, when func(int) deletion, mutate ...func(*bkv1.StorageBucket)) round {
	f.t.Helper()
	before, logStart := requests.snapshot(f.store), logs.Len()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	moments := f.reached(names)
	claims := make([]*bkv1.StorageBucket, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		claims[i] = &bkv1.StorageBucket{}
		wg.Go(func() {
			sb := claims[i]
			sb.Namespace, sb.Name = f.ns, names[i]
			sb.Spec.ObjectStoreRef.Name = f.store
			sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete
			for _, m := range mutate {
				m(sb)
			}
			if err := k8s.Create(f.ctx, sb); err != nil {
				errs <- err
				return
			}
			// The delay is the test's input, not a wait for a fact: how far into its
			// first pass the claim is when its deletion arrives.
			at := when(i)
			if at.anchor != afterCreation {
				select {
				case <-moments[at.anchor][sb.Name]:
				case <-time.After(30 * time.Second): // never reached: deleted all the same
				}
			}
			time.Sleep(at.d)
			if err := k8s.Delete(f.ctx, sb.DeepCopy()); client.IgnoreNotFound(err) != nil {
				errs <- err
			}
			if at.strip {
				if err := f.stripFinalizers(sb); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		f.t.Fatal(err)
	}
	f.eventually(2*time.Minute, "every claim of the round to be gone", func() error {
		var left []string
		for _, sb := range claims {
			cur := &bkv1.StorageBucket{}
			if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), cur); err == nil {
				left = append(left, fmt.Sprintf("%s (finalizers %v, deleted %v: %s)", sb.Name, cur.Finalizers, cur.DeletionTimestamp != nil, describe(cur.Status.Conditions)))
			} else if client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		if len(left) > 0 {
			return errf("%d left: %v", len(left), left)
		}
		return nil
	})
	// What the watch saw of each claim is complete once it saw the claim removed.
	intended := map[string]bool{}
	for _, name := range names {
		select {
		case <-moments[gone][name]:
		case <-time.After(30 * time.Second):
			f.t.Fatalf("the watch never saw %s removed", name)
		}
		select {
		case <-moments[afterIntent][name]:
			intended[name] = true
		default:
		}
	}
	_, _, ops := since(before, requests.snapshot(f.store))
	vanished := 0
	for _, line := range strings.Split(logs.From(logStart), "\n") {
		if strings.Contains(line, "went without its deletion pass") && strings.Contains(line, f.ns) {
			vanished++
		}
	}
	f.t.Logf("S3 requests of the round: %v; claims the API server removed before their deletion pass, whose policy was carried out all the same: %d", ops, vanished)
	if ops["CreateBucket"] == 0 {
		f.t.Fatalf("no claim of the round reached CreateBucket before its deletion: the round proves nothing")
	}
	return round{claims: claims, intended: intended}
}

// stripFinalizers removes every finalizer of the claim, as a tenant with the
// finalizers verb can: the claim goes at once, without its deletion pass.
func (f *fixture) stripFinalizers(sb *bkv1.StorageBucket) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &bkv1.StorageBucket{}
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		cur.Finalizers = nil
		return client.IgnoreNotFound(k8s.Update(f.ctx, cur))
	})
}

// noBucketLeft fails the test for every bucket on the store that one of the claims
// created or that is tagged as one of them. The claims name no bucket: theirs are
// derived from the namespace, so every one starts with it.
func (f *fixture) noBucketLeft(r round) {
	f.t.Helper()
	claims := r.claims
	names := map[string]bool{}
	for _, sb := range claims {
		names[f.ns+"/"+sb.Name] = true
	}
	buckets, err := f.admin.ListBuckets(f.ctx)
	must(f.t, err)
	var leaked []string
	for _, b := range buckets {
		if !strings.HasPrefix(b, f.ns+"-") {
			continue
		}
		tags, err := f.admin.GetBucketTagging(f.ctx, b)
		if s3.KindOf(err) == s3.KindNotFound {
			continue
		}
		must(f.t, err)
		leaked = append(leaked, fmt.Sprintf("%s (claim tag %q, ours %v)", b, tags[bkv1.TagClaim], names[tags[bkv1.TagClaim]]))
	}
	sort.Strings(leaked)
	if len(leaked) > 0 {
		f.t.Errorf("%d of %d claims left a bucket behind once deleted: %s", len(leaked), len(claims), strings.Join(leaked, "; "))
	}
}

// deletionsAnnounced fails the test for every claim whose deletion did not say what it
// decided: one that announced anything (it had a pass), or for which a CreateBucket was
// sent, announces a decision too, and one that announced a bucket created announces it
// deleted. A claim deleted before its first pass announces nothing at all. A claim that
// went without its deletion pass is gone before its policy is carried out: its decision
// is the fact that says the operator is done with it.
func (f *fixture) deletionsAnnounced(r round) {
	f.t.Helper()
	claims := r.claims
	decisions := []string{bkv1.EventReasonBucketDeleted, bkv1.EventReasonBucketAbsent, bkv1.EventReasonBucketLeftAlone,
		bkv1.EventReasonBucketReleased, bkv1.EventReasonBucketAbandoned, bkv1.EventReasonBucketNotReleased}
	f.eventually(2*time.Minute, "every deletion to announce its decision", func() error {
		var silent []string
		for _, sb := range claims {
			ev := f.eventReasons(sb)
			decided := false
			for _, d := range decisions {
				decided = decided || ev[d] > 0
			}
			if ((len(ev) > 0 || r.intended[sb.Name]) && !decided) || (ev[bkv1.ReasonBucketCreated] > 0 && ev[bkv1.EventReasonBucketDeleted] == 0) {
				silent = append(silent, fmt.Sprintf("%s %v", sb.Name, ev))
			}
		}
		if len(silent) > 0 {
			return errf("deletions that did not announce their decision: %v", silent)
		}
		return nil
	})
}
