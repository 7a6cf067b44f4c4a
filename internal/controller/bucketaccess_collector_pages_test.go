package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/metrics"
)

// TestAccessCollectorSweepsAStoreThatIgnoresMaxItems: SeaweedFS answers ListUsers with
// every user in one page whatever MaxItems asks, in name order. Two ObjectStores on its
// one IAM account, more settled accesses on one of them than a collector pass may list
// the keys of, and behind them by name the user of an access on the other store whose
// tenant strips the finalizer and deletes it. The collector's sweep of that store goes
// on by name inside the page and reaches the user: its key is refused and the user
// gone. Its IAM calls stay within their pace (ListAccessKeys counted per second from
// the manager's IAM request log), and once every user was found holding its key,
// further passes list no keys at all.
//
// Not parallel: the hundred users of other stores' accesses are key checks for the
// sweep of every SeaweedFS store of the suite while they exist.
func TestAccessCollectorSweepsAStoreThatIgnoresMaxItems(t *testing.T) {
	f := newFixture(t, seaweed, withIAMOn(seaweed))
	other := f.storeOn(seaweed, withIAMOn(seaweed))
	f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	waitStoreReady(f, other)
	f.waitCondition(f.bucket("shared", func(sb *bkv1.StorageBucket) { sb.Spec.ObjectStoreRef.Name = other }),
		bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)

	// The victim first, waiting for its bucket: an access whose user's name (a hash
	// of its uid) sorts late, so that the users made after it mostly sort before it.
	victim := lateSortingAccess(f, "data", "victim-creds")
	var accesses []*bkv1.BucketAccess
	t.Cleanup(func() { deleteAccesses(f, accesses) })
	for ahead := 0; ahead < defaults.AccessCollectMaxKeyChecks+10; {
		ba := &bkv1.BucketAccess{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("app-%03d", len(accesses))},
			Spec:       bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{{Name: "shared"}}, SecretName: fmt.Sprintf("app-%03d", len(accesses))},
		}
		must(t, k8s.Create(f.ctx, ba))
		accesses = append(accesses, ba)
		if iam.UserName(clusterID, string(ba.UID)) < iam.UserName(clusterID, string(victim.UID)) {
			ahead++
		}
	}
	settled := len(accesses)
	f.eventually(5*time.Minute, fmt.Sprintf("%d accesses Ready on %s", settled, other), func() error {
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
		if ready < settled {
			return fmt.Errorf("%d Ready", ready)
		}
		return nil
	})

	bucket := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	victim = f.waitAccessReady(victim)
	key := f.secretClient("victim-creds")
	must(t, key.c.PutObject(f.ctx, bucket, "x", []byte("x")))
	users := allUserNames(t, seaweed)
	t.Logf("SeaweedFS lists %d users, the victim's at %d (in name order: %v)", len(users), slices.Index(users, victim.Status.IdentityName), slices.IsSorted(users))

	start := time.Now()
	stripFinalizerAndDelete(f, tenantClient(t, f), victim)
	f.eventually(90*time.Second, "key "+key.id+" refused", func() error {
		if err := key.c.PutObject(f.ctx, bucket, "revoked", []byte("x")); err == nil {
			return fmt.Errorf("key %s still writes", key.id)
		}
		return nil
	})
	f.eventually(30*time.Second, "user "+victim.Status.IdentityName+" gone", func() error {
		if slices.Contains(allUserNames(t, seaweed), victim.Status.IdentityName) {
			return fmt.Errorf("still listed")
		}
		return nil
	})
	t.Logf("revoked %v after the access went", time.Since(start).Round(time.Second))

	// Settled: three more passes over the store list no keys. (No access is on the
	// store any more, so every ListAccessKeys sent there is the collector's.)
	passes := func() float64 {
		v, _ := series(t, metrics.AccessCollectorPasses, map[string]string{"store": f.store})
		return v
	}
	checks := func() float64 {
		v, _ := series(t, metrics.AccessCollectorKeyChecks, map[string]string{"store": f.store})
		return v
	}
	// The pass under way may still be the one that revoked: start from the one after.
	p0 := passes()
	f.eventually(60*time.Second, "a pass over "+f.store, func() error {
		if passes() < p0+1 {
			return fmt.Errorf("no pass yet")
		}
		return nil
	})
	p1, c1, l1 := passes(), checks(), len(iamRequests.times(f.store, "ListAccessKeys"))
	f.eventually(60*time.Second, "three more passes over "+f.store, func() error {
		if p := passes(); p < p1+3 {
			return fmt.Errorf("%v passes", p-p1)
		}
		return nil
	})
	if d := checks() - c1; d > 0 {
		t.Errorf("%v more key checks in three passes over users already found holding their key", d)
	}
	if d := len(iamRequests.times(f.store, "ListAccessKeys")) - l1; d > 0 {
		t.Errorf("%d ListAccessKeys sent to %s in three passes after the sweep settled", d, f.store)
	}

	// Bounded: never more ListAccessKeys to the store in one second than the
	// collector's pace allows (its burst and a second's worth), give or take the few
	// the controller sends revoking the access and the spread of answer times: the
	// log has when each answer came, the pace rules when each request left.
	peak, total := perSecondPeak(iamRequests.times(f.store, "ListAccessKeys"), start)
	t.Logf("%d ListAccessKeys to %s since the access went, at most %d in one second", total, f.store, peak)
	if limit := defaults.AccessCollectRequestsPerSecond + defaults.AccessCollectBurst + 5; peak > limit {
		t.Errorf("%d ListAccessKeys in one second, over the collector's pace (%d/s, burst %d)", peak, defaults.AccessCollectRequestsPerSecond, defaults.AccessCollectBurst)
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
