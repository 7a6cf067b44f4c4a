package integration_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/metrics"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestPacedAccessCollectorSweepsAStoreThatIgnoresMaxItems: SeaweedFS answers ListUsers with
// every user in one page whatever MaxItems asks. Several ObjectStores on its one IAM
// account, each with settled accesses, so many that every store's sweep meets more
// users of other stores' accesses than a pass may list the keys of; behind all of them
// by name, on one more store, an access whose tenant strips the finalizer and deletes
// it. Every store's sweep sees every user of the account, and (before this was fixed)
// each restarted its page at the same first users every second. The sweeps go on by
// name inside the page and reach the user: its key is refused and the user gone. The
// collector's IAM calls stay within their pace (ListAccessKeys to the victim's store
// counted per second from the manager's IAM request log, where only the collector sends
// any once its access is gone), and once every user was found holding its key, further
// passes list no keys at all.
//
// Not parallel: the users of other stores' accesses are key checks for the sweep of
// every SeaweedFS store of the suite while they exist.
func TestPacedAccessCollectorSweepsAStoreThatIgnoresMaxItems(t *testing.T) {
	f := newFixture(t, seaweed, withIAMOn(seaweed))
	// A hundred and more accesses take longer to issue than a fixture's three minutes:
	// about 25 a minute under the race detector with the other suites running beside.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	t.Cleanup(cancel)
	f.ctx = ctx
	f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	// Each of these stores' sweeps meets the users of the others' accesses: with k
	// stores of n accesses each, (k-1)*n of them.
	const others = 5
	perStore := defaults.AccessCollectMaxKeyChecks/(others-1) + 3
	var buckets []string
	for i := range others {
		store := f.storeNamed(fmt.Sprintf("%s-%d", f.store, i), seaweed, withIAMOn(seaweed))
		waitStoreReady(f, store)
		name := fmt.Sprintf("shared-%d", i)
		f.bucket(name, func(sb *bkv1.StorageBucket) { sb.Spec.ObjectStoreRef.Name = store })
		buckets = append(buckets, name)
	}

	// The victim first, waiting for its bucket: an access whose user's name (a hash
	// of its uid) sorts late, so that the users made after it mostly sort before it.
	victim := lateSortingAccess(f, "data", "victim-creds")
	behind := iam.UserName(clusterID, string(victim.UID))
	var accesses []*bkv1.BucketAccess
	t.Cleanup(func() { deleteAccesses(f, accesses) })
	made := time.Now()
	for _, bucket := range buckets {
		for ahead := 0; ahead < perStore; {
			ba := &bkv1.BucketAccess{
				ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("app-%03d", len(accesses))},
				Spec:       bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{{Name: bucket}}, SecretName: fmt.Sprintf("app-%03d", len(accesses))},
			}
			must(t, k8s.Create(f.ctx, ba))
			accesses = append(accesses, ba)
			if iam.UserName(clusterID, string(ba.UID)) < behind {
				ahead++
			}
		}
	}
	f.eventually(10*time.Minute, fmt.Sprintf("%d accesses Ready", len(accesses)), func() error {
		list := &bkv1.BucketAccessList{}
		if err := k8s.List(f.ctx, list, client.InNamespace(f.ns)); err != nil {
			return err
		}
		ready := 0
		for _, ba := range list.Items {
			if c := apimeta.FindStatusCondition(ba.Status.Conditions, bkv1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == ba.Generation {
				ready++
			}
		}
		if ready < len(accesses) {
			return fmt.Errorf("%d Ready", ready)
		}
		return nil
	})
	allReady := time.Now()
	t.Logf("%d accesses Ready %v after the first was made", len(accesses), allReady.Sub(made).Round(time.Second))

	bucket := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	victim = f.waitAccessReady(victim)
	key := f.secretClient("victim-creds")
	must(t, key.c.PutObject(f.ctx, bucket, "x", []byte("x")))
	users := allUserNames(t, seaweed)
	t.Logf("SeaweedFS lists %d users, the victim's at %d", len(users), slices.Index(users, victim.Status.IdentityName))

	start := time.Now()
	stripFinalizerAndDelete(f, tenantClient(t, f), victim)
	// The first sweep of every store lists the keys of every user of the others'
	// accesses, some seven hundred calls sharing the collector's one pace: about a
	// minute and more before the victim's store reaches it.
	f.eventually(3*time.Minute, "key "+key.id+" refused", func() error {
		err := key.c.PutObject(f.ctx, bucket, "revoked", []byte("x"))
		if kind := s3.KindOf(err); kind == s3.KindAccessDenied || kind == s3.KindInvalidCredentials {
			return nil
		}
		return fmt.Errorf("key %s: %v", key.id, err)
	})
	f.eventually(30*time.Second, "user "+victim.Status.IdentityName+" gone", func() error {
		if slices.Contains(allUserNames(t, seaweed), victim.Status.IdentityName) {
			return fmt.Errorf("still listed")
		}
		return nil
	})
	t.Logf("revoked %v after the access went", time.Since(start).Round(time.Second))

	// Bounded: never more ListAccessKeys to the store in one second than the
	// collector's pace allows (its burst and a second's worth), give or take the few
	// the controller sends for the victim and the spread of answer times: the log has
	// when each answer came, the pace rules when each request left.
	peak, total := perSecondPeak(iamRequests.times(f.store, "ListAccessKeys"), allReady)
	t.Logf("%d ListAccessKeys to %s since every access was Ready, at most %d in one second", total, f.store, peak)
	if limit := defaults.AccessCollectRequestsPerSecond + defaults.AccessCollectBurst + 5; peak > limit {
		t.Errorf("%d ListAccessKeys in one second, over the collector's pace (%d/s, burst %d)", peak, defaults.AccessCollectRequestsPerSecond, defaults.AccessCollectBurst)
	}

	// Settled: once a sweep of the store has judged every user since, and found
	// each holding its key, the next sweeps list no keys. (No access is on the store
	// any more, so every ListAccessKeys sent there is the collector's.)
	counter := func(vec *prometheus.CounterVec) func() float64 {
		return func() float64 {
			v, _ := series(t, vec, map[string]string{"store": f.store})
			return v
		}
	}
	sweeps, checks := counter(metrics.AccessCollectorSweeps), counter(metrics.AccessCollectorKeyChecks)
	waitSweeps := func(n float64) {
		from := sweeps()
		f.eventually(3*time.Minute, fmt.Sprintf("%v sweeps of %s", n, f.store), func() error {
			if done := sweeps() - from; done < n {
				return fmt.Errorf("%v sweeps", done)
			}
			return nil
		})
	}
	// The sweep under way may have begun before the revocation: the one after it
	// begins after.
	waitSweeps(2)
	c1, l1 := checks(), len(iamRequests.times(f.store, "ListAccessKeys"))
	waitSweeps(2)
	if d := checks() - c1; d > 0 {
		t.Errorf("%v key checks in two sweeps over users already found holding their key", d)
	}
	if d := len(iamRequests.times(f.store, "ListAccessKeys")) - l1; d > 0 {
		t.Errorf("%d ListAccessKeys sent to %s in two sweeps after the sweep settled", d, f.store)
	}
}

// lateSortingAccess creates an access (naming bucket, which need not exist yet) whose
// user's name starts its hash with "f": created and deleted again until the API
// server hands out a uid that hashes so (one in sixteen).
func lateSortingAccess(f *fixture, bucket, secret string) *bkv1.BucketAccess {
	f.t.Helper()
	for range 200 {
		ba := &bkv1.BucketAccess{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, GenerateName: "victim-"},
			Spec:       bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{{Name: bucket}}, SecretName: secret},
		}
		must(f.t, k8s.Create(f.ctx, ba))
		user := iam.UserName(clusterID, string(ba.UID))
		if strings.HasPrefix(user[len(user)-40:], "f") {
			f.t.Cleanup(func() { deleteAccesses(f, []*bkv1.BucketAccess{ba}) })
			return ba
		}
		must(f.t, k8s.Delete(f.ctx, ba))
	}
	f.t.Fatal("no uid among 200 hashed to a late user name")
	return nil
}

// perSecondPeak is the most of times (from since on) in any one-second window, and
// how many there are.
func perSecondPeak(times []time.Time, since time.Time) (peak, total int) {
	var in []time.Time
	for _, at := range times {
		if !at.Before(since) {
			in = append(in, at)
		}
	}
	for i, from := range in {
		n := 0
		for _, at := range in[i:] {
			if at.Sub(from) >= time.Second {
				break
			}
			n++
		}
		peak = max(peak, n)
	}
	return peak, len(in)
}

func waitStoreReady(f *fixture, name string) {
	f.t.Helper()
	f.eventually(60*time.Second, "store "+name+" AccessProviderReady", func() error {
		store := &bkv1.ObjectStore{}
		if err := k8s.Get(f.ctx, types.NamespacedName{Name: name}, store); err != nil {
			return err
		}
		if c := findStoreCond(store, bkv1.ConditionAccessProviderReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("conditions: %s", describe(store.Status.Conditions))
		}
		return nil
	})
}

// deleteAccesses deletes every access at once and waits until all are gone (their
// users with them).
func deleteAccesses(f *fixture, accesses []*bkv1.BucketAccess) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, ba := range accesses {
		_ = k8s.Delete(ctx, ba)
	}
	for _, ba := range accesses {
		for ctx.Err() == nil {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(ba), &bkv1.BucketAccess{}); client.IgnoreNotFound(err) == nil && err != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
