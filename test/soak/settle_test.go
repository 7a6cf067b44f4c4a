package soak_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/invariants"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// settleTimeout bounds a settle: every claim and access at rest, every deletion done,
// and then the checker clean, which takes at least one access-collector interval when a
// user was left behind. Reaching it is itself a finding (invariant Settles).
const settleTimeout = 2 * time.Minute

// settles is the soak's own invariant: after a round the system comes to rest in time.
const settles invariants.Invariant = "Settles"

// settle waits for the facts that say the system is at rest (unsettled), then for the
// checker to find nothing it has not reported before. What is still wrong at the
// deadline is recorded as findings of the round.
func (r *soakRun) settle(what string) {
	start := time.Now()
	deadline := start.Add(settleTimeout)
	var pending []string
	var found []invariants.Violation
	for {
		var err error
		pending, err = r.unsettled()
		if err != nil {
			pending = []string{"cluster: " + err.Error()}
		}
		if len(pending) == 0 {
			found = r.stats.fresh(r.rig.check(r.ctx))
			if len(found) == 0 {
				break
			}
		}
		if time.Now().After(deadline) || r.ctx.Err() != nil {
			if len(pending) > 0 { // the checker's view of a system not at rest, for the record
				found = r.stats.fresh(r.rig.check(r.ctx))
			}
			for _, p := range pending {
				object, why, _ := strings.Cut(p, ": ")
				found = append(found, invariants.Violation{Invariant: settles, Object: object, Found: "not at rest after " + settleTimeout.String() + ": " + why})
			}
			break
		}
		time.Sleep(2 * time.Second)
	}
	took := time.Since(start)
	r.logf("%s settled in %s with %d new finding(s)", what, took.Round(time.Second), len(found))
	for _, v := range found {
		r.logf("FINDING %s", v)
		r.t.Logf("seed %d %s: %s\n%s", r.seed, what, v, r.rig.logLinesAbout(v.Object, 15))
	}
	r.stats.record(r.seed, r.round, took, found)
}

// unsettled lists what is not at rest yet, as "object: why", following the advice of
// a deletion blocked on a non-empty bucket (emptying it) as its tenant would.
func (r *soakRun) unsettled() ([]string, error) {
	ctx := r.ctx
	sbs, bas, nss := &bkv1.StorageBucketList{}, &bkv1.BucketAccessList{}, &corev1.NamespaceList{}
	for _, l := range []client.ObjectList{sbs, bas, nss} {
		if err := k8s.List(ctx, l); err != nil {
			return nil, err
		}
	}
	var out []string
	ready := map[types.NamespacedName]bool{}
	for i := range sbs.Items {
		sb := &sbs.Items[i]
		key := "storagebucket " + sb.Namespace + "/" + sb.Name
		c := findCondition(sb.Status.Conditions, bkv1.ConditionReady)
		if !sb.DeletionTimestamp.IsZero() {
			if c != nil && c.Reason == bkv1.ReasonBucketNotEmpty {
				r.emptyBucket(sb)
			}
			out = append(out, key+": deletion pending ("+testenv.DescribeConditions(sb.Status.Conditions)+")")
			continue
		}
		if why := atRest(sb.Generation, sb.Status.Conditions); why != "" {
			out = append(out, key+": "+why)
			continue
		}
		ready[types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}] = c.Status == metav1.ConditionTrue
	}
	for i := range bas.Items {
		ba := &bas.Items[i]
		key := "bucketaccess " + ba.Namespace + "/" + ba.Name
		if !ba.DeletionTimestamp.IsZero() {
			out = append(out, key+": deletion pending ("+testenv.DescribeConditions(ba.Status.Conditions)+")")
			continue
		}
		if why := accessAtRest(ba, ready); why != "" {
			out = append(out, key+": "+why)
		}
	}
	for _, ns := range nss.Items {
		if ns.Labels[labelTenant] == "true" && !ns.DeletionTimestamp.IsZero() {
			out = append(out, "namespace "+ns.Name+": still terminating")
		}
	}
	leading := false
	for _, rep := range r.rig.replicas {
		leading = leading || rep.leads()
	}
	if !leading {
		out = append(out, "operator: no replica has acquired the lease")
	}
	return out, nil
}

// atRest says why an object's conditions are not a verdict on its current generation
// ("" when they are): Ready=True, or Stalled=True (a terminal refusal), at it.
func atRest(generation int64, conds []metav1.Condition) string {
	c := findCondition(conds, bkv1.ConditionReady)
	switch {
	case c == nil:
		return "no Ready condition yet"
	case c.ObservedGeneration != generation:
		return fmt.Sprintf("Ready is of generation %d, not %d", c.ObservedGeneration, generation)
	case c.Status == metav1.ConditionTrue:
		return ""
	}
	if s := findCondition(conds, bkv1.ConditionStalled); s != nil && s.Status == metav1.ConditionTrue && s.ObservedGeneration == generation {
		return ""
	}
	return "not Ready: " + testenv.DescribeConditions(conds)
}

// accessAtRest is atRest for a BucketAccess, which may also rest waiting for a
// StorageBucket that is missing or will not be Ready (but not for one that is).
func accessAtRest(ba *bkv1.BucketAccess, ready map[types.NamespacedName]bool) string {
	why := atRest(ba.Generation, ba.Status.Conditions)
	if why == "" {
		return ""
	}
	c := findCondition(ba.Status.Conditions, bkv1.ConditionReady)
	if c == nil || c.ObservedGeneration != ba.Generation || c.Reason != bkv1.ReasonBucketNotReady {
		return why
	}
	for _, g := range ba.Spec.Buckets {
		if !ready[types.NamespacedName{Namespace: ba.Namespace, Name: g.Name}] {
			return "" // waits for a bucket that is missing, or at rest and not Ready
		}
	}
	return "waits for its buckets, which are all Ready: " + testenv.DescribeConditions(ba.Status.Conditions)
}

// emptyBucket follows the advice of a deletion blocked with BucketNotEmpty: the tenant
// deletes its objects.
func (r *soakRun) emptyBucket(sb *bkv1.StorageBucket) {
	sr := r.rig.store(sb.HomeStore())
	if sr == nil || sb.Status.BucketName == "" {
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	var page *s3.PageToken
	for {
		got, err := sr.admin.ListObjectVersions(ctx, sb.Status.BucketName, page)
		if err != nil {
			r.logf("emptying %s for %s/%s: %v", sb.Status.BucketName, sb.Namespace, sb.Name, err)
			return
		}
		var ids []s3.ObjectID
		for _, v := range got.Versions {
			ids = append(ids, s3.ObjectID{Key: v.Key, VersionID: v.VersionID})
		}
		if err := sr.admin.DeleteObjects(ctx, sb.Status.BucketName, ids); err != nil {
			r.logf("emptying %s: %v", sb.Status.BucketName, err)
			return
		}
		if got.Next == nil {
			break
		}
		page = got.Next
	}
	r.stats.count(func(s *summary) { s.Operations["empty-blocked-bucket"]++ })
	r.logf("emptied %s: the deletion of %s/%s was blocked on it", sb.Status.BucketName, sb.Namespace, sb.Name)
}

// teardown deletes every tenant namespace and settles: the end state is an empty
// cluster, checked like any other.
func (r *soakRun) teardown() {
	r.round++
	for _, tn := range r.tenants {
		if !tn.exists {
			continue
		}
		tn.exists = false
		if err := client.IgnoreNotFound(k8s.Delete(r.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tn.name}})); err != nil {
			r.t.Errorf("deleting namespace %s: %v", tn.name, err)
		}
	}
	r.settle("teardown")
}

// logLinesAbout is the operator's log lines that mention the object of a finding
// ("storagebucket <namespace>/<name>", "bucket <store>/<name>", ...), at most n of them.
func (rg *rig) logLinesAbout(object string, n int) string {
	kind, ref, _ := strings.Cut(object, " ")
	first, name, _ := strings.Cut(ref, "/")
	match := func(l string) bool { return name != "" && strings.Contains(l, name) }
	switch kind {
	case "storagebucket", "bucketaccess", "secret":
		match = func(l string) bool {
			return strings.Contains(l, ref) || strings.Contains(l, `"name":"`+name+`"`) && strings.Contains(l, `"namespace":"`+first+`"`)
		}
	}
	var lines []string
	for _, rep := range rg.replicas {
		b, err := os.ReadFile(rep.logPath)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if match(l) {
				lines = append(lines, rep.name+": "+l)
			}
		}
	}
	return strings.Join(lastN(lines, n), "\n")
}
