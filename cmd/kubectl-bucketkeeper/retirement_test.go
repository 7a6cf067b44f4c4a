package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestStatusOfARetirement: a SeaweedFS store with three claims, two in a namespace a
// second SeaweedFS (the successor) allows and one in a namespace it does not, retires
// into the successor. Once the two buckets moved (one with objects) and the third is
// skipped, status prints the claims' own states counted (two moved, one skipped, as the
// store's count also says by then), the bytes the finished moves copied, and the
// skipped claim with its StoreRetired condition's message; -o json holds the same.
func TestStatusOfARetirement(t *testing.T) {
	f := newFixture(t, nil, func(s *bkv1.ObjectStore) { s.Spec.AccessProvider = nil })
	next, err := testenv.StartS3(testenv.SeaweedFS)
	must(t, err)
	t.Cleanup(func() { _ = next.Close() })

	allowed := "test.bucketkeeper.io/successor"
	ns := &corev1.Namespace{}
	must(t, k8s.Get(f.ctx, client.ObjectKey{Name: f.ns}, ns))
	patch := client.MergeFrom(ns.DeepCopy())
	ns.Labels[allowed] = "yes"
	must(t, k8s.Patch(f.ctx, ns, patch))
	refusedNS := f.otherNamespace()

	must(t, k8s.Create(f.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "successor-credentials"},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: next.AccessKeyID, bkv1.CredentialsKeySecretAccessKey: next.SecretAccessKey},
	}))
	successor := &bkv1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: f.store + "-next"},
		Spec: bkv1.ObjectStoreSpec{Endpoint: next.Endpoint, Region: next.Region, ForcePathStyle: true,
			CredentialsSecretRef: &bkv1.SecretReference{Namespace: f.ns, Name: "successor-credentials"},
			HealthCheck:          bkv1.StoreHealthCheck{Interval: &metav1.Duration{Duration: 5 * time.Second}},
			AllowedNamespaces:    &metav1.LabelSelector{MatchLabels: map[string]string{allowed: "yes"}}},
	}
	must(t, k8s.Create(f.ctx, successor))
	t.Cleanup(func() { _ = k8s.Delete(f.ctx, successor) })
	f.waitConditions(successor, "Ready=True")

	var claims []*bkv1.StorageBucket
	for _, name := range []string{"photos", "logs"} {
		claims = append(claims, f.claim(name))
	}
	refused := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: refusedNS, Name: "audit"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}}}
	must(t, k8s.Create(f.ctx, refused))
	for _, sb := range append(claims, refused) {
		f.waitConditions(sb, "Ready=True")
	}
	admin := storeAdmin(t)
	for i := range 3 {
		must(t, admin.PutObject(f.ctx, claims[0].Status.BucketName, fmt.Sprintf("photo-%d", i), []byte(strings.Repeat("x", 1000+i))))
	}

	store := &bkv1.ObjectStore{}
	must(t, k8s.Get(f.ctx, client.ObjectKey{Name: f.store}, store))
	patch = client.MergeFrom(store.DeepCopy())
	store.Spec.Retire = &bkv1.RetireSpec{Into: successor.Name}
	must(t, k8s.Patch(f.ctx, store, patch))

	// Done once both buckets moved and the refused one is skipped, as the claims say.
	for _, sb := range claims {
		f.waitConditionsWithin(3*time.Minute, sb, bkv1.ConditionStoreRetired+"=True/"+bkv1.ReasonRetired)
	}
	f.waitConditions(refused, bkv1.ConditionStoreRetired+"=True/"+bkv1.ReasonRetirementSkipped)
	err = testenv.Poll(f.ctx, func() error {
		must(t, k8s.Get(f.ctx, client.ObjectKey{Name: f.store}, store))
		if st := store.Status.Retirement; st == nil || st.Moved != 2 || st.Skipped != 1 {
			return fmt.Errorf("status.retirement %+v", st)
		}
		return nil
	})
	must(t, err)

	// What the claims say, counted here.
	var movedBytes int64
	moved := 0
	for _, sb := range claims {
		must(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), sb))
		if m := sb.Status.Move; m != nil && m.Phase == bkv1.MoveDone && m.From == f.store && sb.HomeStore() == successor.Name {
			moved++
			movedBytes += m.CopiedBytes
		}
	}
	must(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(refused), refused))
	skip := apimeta.FindStatusCondition(refused.Status.Conditions, bkv1.ConditionStoreRetired)
	if moved != 2 || movedBytes != 3*1000+3 || refused.Status.Retirement == nil || refused.Status.Retirement.Skipped == "" {
		t.Fatalf("the claims: %d moved, %d bytes copied, the refused one's retirement %+v", moved, movedBytes, refused.Status.Retirement)
	}

	r := plugin(t, "", "status", "objectstore/"+f.store)
	if r.code != 0 {
		t.Fatal(r)
	}
	t.Logf("status:\n%s", r)
	r.contains(t, "status of a retirement",
		"Retirement into "+successor.Name+" (",
		fmt.Sprintf("buckets: %d moved, 0 moving, 0 queued, 1 skipped, 0 not started", moved),
		fmt.Sprintf("moved: %s in %d finished moves", bytesOf(movedBytes), moved),
		fmt.Sprintf("%s/audit: %s: %s", refusedNS, refused.Status.Retirement.Skipped, skip.Message))

	r = plugin(t, "", "status", f.store, "-o", "json")
	var st storeStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 {
		t.Fatalf("status -o json: %v\n%s", err, r)
	}
	if rt := st.Retirement; rt == nil || rt.Into != successor.Name || rt.Counts == nil || rt.Counts.Moved != 2 || rt.Counts.Skipped != 1 ||
		rt.MovedClaims != moved || rt.MovedBytes != movedBytes || len(rt.Skipped) != 1 || rt.Skipped[0].Claim != refusedNS+"/audit" {
		t.Errorf("status -o json: retirement %+v", st.Retirement)
	}
}
