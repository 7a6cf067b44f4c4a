package reconcile

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// readyBucketJSON is StorageBucket i as the API server sends it once Ready and
// probed: what the cache decodes for every bucket.
func readyBucketJSON(t testing.TB, i int) []byte {
	t.Helper()
	name := "bucket-" + strconv.Itoa(i)
	uid := types.UID(fmt.Sprintf("6b1c7f0e-0000-4000-8000-%012d", i))
	now := metav1.NewTime(time.Unix(1764547200, 0))
	yes := true
	cond := func(typ, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: now, ObservedGeneration: 1}
	}
	sb := bkv1.StorageBucket{
		TypeMeta: metav1.TypeMeta{APIVersion: bkv1.GroupVersion.String(), Kind: "StorageBucket"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: name, UID: uid, ResourceVersion: strconv.Itoa(100000 + i),
			Generation: 1, CreationTimestamp: now, Labels: map[string]string{"app.kubernetes.io/part-of": "shop"},
			Finalizers: []string{bkv1.Finalizer}},
		Spec: bkv1.StorageBucketSpec{
			ObjectStoreRef: bkv1.ObjectStoreReference{Name: "seaweed"}, Tags: map[string]string{"team": "shop"},
			PublicAccess: bkv1.PublicAccessBlocked, DeletionPolicy: bkv1.DeletionPolicyRetain, Adoption: bkv1.AdoptionNever,
			Probe: bkv1.ProbeSpec{Mode: bkv1.ProbeModeHead, Timeout: &metav1.Duration{Duration: 5 * time.Second}},
		},
		Status: bkv1.StorageBucketStatus{
			ObservedGeneration: 1,
			Conditions: []metav1.Condition{
				cond(bkv1.ConditionAvailable, bkv1.ReasonProbeSucceeded, "the bucket answered HEAD"),
				cond(bkv1.ConditionProvisioned, bkv1.ReasonBucketCreated, "created"),
				cond(bkv1.ConditionConfigured, bkv1.ReasonConfigApplied, "configuration applied"),
				cond(bkv1.ConditionReady, bkv1.ReasonReady, "bucket tenant-a-"+name+" is provisioned and configured"),
			},
			BucketName: "tenant-a-" + name, Endpoint: "http://127.0.0.1:8333", Region: "us-east-1",
			ConnectionSecretName: name + "-bucket", Available: &yes, LastProbeTime: &now,
			LastProbeLatency: &metav1.Duration{Duration: 3 * time.Millisecond},
			CreateIntent:     &bkv1.CreateIntent{BucketName: "tenant-a-" + name, UID: uid},
			Applied:          &bkv1.AppliedConfiguration{TagKeys: []string{"team"}, Hash: "h" + strconv.Itoa(i)},
		},
	}
	raw, err := json.Marshal(sb)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func decodeBucket(t testing.TB, raw []byte) *bkv1.StorageBucket {
	t.Helper()
	sb := &bkv1.StorageBucket{}
	if err := json.Unmarshal(raw, sb); err != nil {
		t.Fatal(err)
	}
	return sb
}

func sameData(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// TestInternStorageBucket: interning changes no value, and two buckets decoded apart
// then share their repeated strings.
func TestInternStorageBucket(t *testing.T) {
	table := &internTable{}
	a, b := decodeBucket(t, readyBucketJSON(t, 1)), decodeBucket(t, readyBucketJSON(t, 2))
	want := decodeBucket(t, readyBucketJSON(t, 1))
	table.internStorageBucket(a)
	table.internStorageBucket(b)
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("interning changed the bucket:\n got %+v\nwant %+v", a, want)
	}
	shared := map[string][2]string{
		"namespace":        {a.Namespace, b.Namespace},
		"finalizer":        {a.Finalizers[0], b.Finalizers[0]},
		"condition type":   {a.Status.Conditions[3].Type, b.Status.Conditions[3].Type},
		"condition reason": {a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason},
		"condition status": {string(a.Status.Conditions[0].Status), string(b.Status.Conditions[1].Status)},
		"deletion policy":  {string(a.Spec.DeletionPolicy), string(b.Spec.DeletionPolicy)},
		"own bucket name":  {a.Status.BucketName, a.Status.CreateIntent.BucketName},
		"own UID":          {string(a.UID), string(a.Status.CreateIntent.UID)},
	}
	for what, s := range shared {
		if !sameData(s[0], s[1]) {
			t.Errorf("%s %q is held twice", what, s[0])
		}
	}
	if sameData(a.Status.BucketName, b.Status.BucketName) {
		t.Error("two buckets' names share storage: the test cannot tell interning from aliasing")
	}
}

// TestInternTakesNothingFromTenants: what a tenant writes freely (labels, tags, the
// store's name, the region, finalizers of its own) never enters the table, so no
// tenant can fill it and turn the sharing off for the others.
func TestInternTakesNothingFromTenants(t *testing.T) {
	table := &internTable{}
	sb := decodeBucket(t, readyBucketJSON(t, 1))
	sb.Labels = map[string]string{"hostile-label": "hostile-value"}
	sb.Spec.Tags = map[string]string{"hostile-tag": "hostile-tag-value"}
	sb.Spec.ObjectStoreRef.Name = "hostile-store"
	sb.Spec.Region = "hostile-region"
	sb.Finalizers = append(sb.Finalizers, "hostile.example/finalizer")
	sb.Status.Applied.TagKeys = []string{"hostile-tag"}
	table.internStorageBucket(sb)
	for s := range table.strings {
		if strings.HasPrefix(s, "hostile") {
			t.Errorf("the table holds %q, which a tenant wrote", s)
		}
	}
	if len(table.strings) == 0 {
		t.Fatal("the table holds nothing: the test cannot tell")
	}
}

// TestInternTableIsBounded: past its size the table keeps nothing new, and what it
// holds is still shared.
func TestInternTableIsBounded(t *testing.T) {
	table := &internTable{}
	first := table.intern(string([]byte("first")))
	for i := range internTableSize + 100 {
		table.intern("value-" + strconv.Itoa(i))
	}
	if n := len(table.strings); n != internTableSize {
		t.Fatalf("table holds %d strings, bound %d", n, internTableSize)
	}
	if got := table.intern(string([]byte("first"))); !sameData(got, first) {
		t.Fatal("a string interned before the table filled up is no longer shared")
	}
}

// BenchmarkCachedStorageBucketHeap reports the live heap per cached StorageBucket
// after the cache transform, with the plain decode as the baseline in the same run.
func BenchmarkCachedStorageBucketHeap(b *testing.B) {
	const n = 5000
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = readyBucketJSON(b, i)
	}
	for _, tc := range []struct {
		name      string
		transform func(*bkv1.StorageBucket)
	}{
		{"decoded", func(*bkv1.StorageBucket) {}},
		{"transformed", func(sb *bkv1.StorageBucket) { _, _ = TransformStorageBucket()(sb) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var kept []*bkv1.StorageBucket
			var before, after runtime.MemStats
			for b.Loop() {
				kept = nil
				runtime.GC()
				runtime.ReadMemStats(&before)
				kept = make([]*bkv1.StorageBucket, 0, n)
				for _, raw := range raws {
					sb := decodeBucket(b, raw)
					tc.transform(sb)
					kept = append(kept, sb)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
			}
			runtime.KeepAlive(kept)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/bucket")
		})
	}
}
