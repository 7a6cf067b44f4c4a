package integration_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// claimCORS is a claim's spec.cors: a rule with every field, then a minimal one.
var claimCORS = []bkv1.CORSRule{
	{ID: "app", AllowedOrigins: []string{"https://app.example.com", "https://*.example.org"},
		AllowedMethods: []bkv1.CORSMethod{bkv1.CORSMethodGet, bkv1.CORSMethodPut, bkv1.CORSMethodHead},
		AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag", "x-amz-version-id"}, MaxAgeSeconds: ptr32(3000)},
	{AllowedOrigins: []string{"*"}, AllowedMethods: []bkv1.CORSMethod{bkv1.CORSMethodGet}},
}

// storedCORS is claimCORS as the stores that have bucket CORS give it back.
var storedCORS = []s3.CORSRule{
	{ID: "app", AllowedOrigins: []string{"https://app.example.com", "https://*.example.org"}, AllowedMethods: []string{"GET", "PUT", "HEAD"},
		AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag", "x-amz-version-id"}, MaxAgeSeconds: ptr32(3000)},
	{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}},
}

// TestPacedCORS: on every store with bucket CORS, a claim's spec.cors is on its bucket as
// written and becomes Ready, a CORS configuration changed on the store out of band is
// put back by the next sync, and dropping spec.cors deletes it. On MinIO, which has no
// bucket CORS, the claim is NotSupportedByStore by name, its other settings are
// applied, and no CORS configuration is written: the bucket keeps its object and has no
// CORS.
func TestPacedCORS(t *testing.T) {
	t.Parallel() // mostly waiting on sync intervals: see the package doc in suite_test.go
	for _, srv := range everyStore() {
		t.Run(string(srv.Kind), func(t *testing.T) {
			t.Parallel()
			corsOnStore(t, newFixture(t, srv))
		})
	}
	t.Run(string(testenv.MinIO), func(t *testing.T) {
		t.Parallel()
		server := testenv.NewS3(t, testenv.MinIO)
		f := newFixture(t, server, func(store *bkv1.ObjectStore) {
			store.Spec.AccessProvider = &bkv1.AccessProvider{Type: bkv1.AccessProviderNone}
		})
		corsNotSupported(t, f)
	})
}

// sameCORSOnStore compares CORS configurations as a browser reads them: the rules in
// order, each list as a set (Ceph RGW gives a rule's origins and methods back in an
// order of its own).
func sameCORSOnStore(a, b []s3.CORSRule) bool {
	sorted := func(rules []s3.CORSRule) []s3.CORSRule {
		var out []s3.CORSRule
		for _, r := range rules {
			r.AllowedOrigins, r.AllowedMethods = slices.Sorted(slices.Values(r.AllowedOrigins)), slices.Sorted(slices.Values(r.AllowedMethods))
			r.AllowedHeaders, r.ExposeHeaders = slices.Sorted(slices.Values(r.AllowedHeaders)), slices.Sorted(slices.Values(r.ExposeHeaders))
			out = append(out, r)
		}
		return out
	}
	return reflect.DeepEqual(sorted(a), sorted(b))
}

func corsOnStore(t *testing.T, f *fixture) {
	sb := f.bucket("cors", func(sb *bkv1.StorageBucket) { sb.Spec.CORS = claimCORS })
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := got.Status.BucketName
	if c := findCond(got, bkv1.ConditionConfigured); c == nil || !strings.Contains(c.Message, "CORS") {
		t.Errorf("Configured does not name CORS: %s", describe(got.Status.Conditions))
	}
	have, err := f.admin.GetBucketCors(f.ctx, bucket)
	must(t, err)
	if !sameCORSOnStore(have, storedCORS) {
		t.Fatalf("CORS on the store = %+v\nwant %+v", have, storedCORS)
	}

	// Drift: another tool replaces the configuration; the next sync puts the spec's back.
	before := requests.snapshot(f.store)
	drift := []s3.CORSRule{{ID: "other", AllowedOrigins: []string{"https://evil.example"}, AllowedMethods: []string{"GET", "PUT", "DELETE"}}}
	must(t, f.admin.PutBucketCors(f.ctx, bucket, drift))
	f.eventually(60*time.Second, "the drifted CORS corrected", func() error {
		have, err := f.admin.GetBucketCors(f.ctx, bucket)
		if err != nil {
			return err
		}
		if !sameCORSOnStore(have, storedCORS) {
			return fmt.Errorf("CORS on the store = %+v", have)
		}
		if _, _, ops := since(before, requests.snapshot(f.store)); ops["PutBucketCors"] < 1 {
			return fmt.Errorf("the operator wrote no CORS yet: %v", ops)
		}
		return nil
	})
	f.waitEvent(sb, bkv1.ReasonConfigApplied)

	// Dropped from the spec: the CORS the operator set goes.
	f.update(k8s, sb, func() { sb.Spec.CORS = nil })
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	f.eventually(60*time.Second, "the dropped CORS deleted", func() error {
		have, err := f.admin.GetBucketCors(f.ctx, bucket)
		if err != nil || have != nil {
			return fmt.Errorf("CORS on the store = %+v, %v", have, err)
		}
		return nil
	})
}

func corsNotSupported(t *testing.T, f *fixture) {
	sb := f.bucket("cors", func(sb *bkv1.StorageBucket) {
		sb.Spec.CORS = claimCORS
		sb.Spec.Tags = map[string]string{"team": "web"}
	})
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonNotSupportedByStore)
	if c := findCond(got, bkv1.ConditionConfigured); c == nil || c.Reason != bkv1.ReasonNotSupportedByStore || !strings.Contains(c.Message, "does not support CORS") {
		t.Errorf("Configured: %s", describe(got.Status.Conditions))
	}
	bucket := got.Status.BucketName
	if tags, err := f.admin.GetBucketTagging(f.ctx, bucket); err != nil || tags["team"] != "web" {
		t.Errorf("the other settings of a claim MinIO has no CORS for: tags %v, %v", tags, err)
	}
	if _, _, ops := since(map[string]int{}, requests.snapshot(f.store)); ops["DeleteBucketCors"] != 0 {
		t.Errorf("DeleteBucketCors sent to a store without bucket CORS: %v", ops)
	}
	if have, err := f.admin.GetBucketCors(f.ctx, bucket); have != nil || (err != nil && s3.KindOf(err) != s3.KindNotImplemented) {
		t.Errorf("CORS on MinIO after the claim: %+v, %v; want none", have, err)
	}
	if _, err := f.admin.HeadBucket(f.ctx, bucket); err != nil {
		t.Errorf("the bucket on MinIO after the claim: %v", err)
	}
}
