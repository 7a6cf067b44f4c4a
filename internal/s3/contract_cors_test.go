package s3

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// corsContract pins bucket CORS on each store: on one that has it, rules written with
// every field read back the same and in order, and a delete leaves none; on one without
// it (expect.cors), what GET, PUT and DELETE answer, and that none of them touches the
// bucket. The operator reads before it writes and stops at a GET that says the store
// has no CORS; where the GET reads "none" and only the PUT refuses, a claim asking for
// CORS is NotSupportedByStore all the same.
func corsContract(ctx context.Context, t *testing.T, s *store) {
	b := s.bucket(t)
	must(t, "CreateBucket", s.c.CreateBucket(ctx, b, ""))
	rules := []CORSRule{
		{ID: "app", AllowedOrigins: []string{"https://app.example.com", "https://*.example.org"},
			AllowedMethods: []string{"GET", "PUT", "POST", "DELETE", "HEAD"},
			AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag", "x-amz-version-id"}, MaxAgeSeconds: i32(3000)},
		{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}},
	}
	fresh, get := s.c.GetBucketCors(ctx, b)
	answer(t, s, "GetBucketCors of a fresh bucket", get)
	if s.expect.cors != KindUnknown {
		corsMissing(ctx, t, s, b, get, rules)
		return
	}
	if get != nil || fresh != nil {
		t.Fatalf("a fresh bucket's CORS: %v, %v", fresh, get)
	}
	must(t, "PutBucketCors", s.c.PutBucketCors(ctx, b, rules))
	got, err := s.c.GetBucketCors(ctx, b)
	must(t, "GetBucketCors", err)
	cell := "yes"
	switch {
	case reflect.DeepEqual(got, rules):
	case reflect.DeepEqual(sortedCORSLists(got), sortedCORSLists(rules)):
		// A rule's lists are sets to a browser; the operator compares them so.
		cell = "yes, a rule's origins and methods given back in an order of its own"
	default:
		t.Errorf("CORS read back\n got  %s\n want %s", fmtCORS(got), fmtCORS(rules))
	}
	must(t, "DeleteBucketCors", s.c.DeleteBucketCors(ctx, b))
	if got, err := s.c.GetBucketCors(ctx, b); got != nil || err != nil {
		t.Errorf("after delete: %v, %v", got, err)
	}
	again := s.c.DeleteBucketCors(ctx, b)
	answer(t, s, "DeleteBucketCors of a bucket without CORS", again)
	if again != nil {
		cell += "; deleting none answers " + codeOf(again)
	}
	observedTable.Set(t, s.kind, rowCORS, cell)
}

// corsMissing pins a store without bucket CORS: GET (or, where GET reads "none", PUT)
// answers expect.cors, and neither a PUT nor a DELETE changes the bucket, which still
// holds its object and answers HEAD.
func corsMissing(ctx context.Context, t *testing.T, s *store, b string, get error, rules []CORSRule) {
	must(t, "PutObject", s.c.PutObject(ctx, b, "kept", []byte("kept")))
	put := s.c.PutBucketCors(ctx, b, rules)
	answer(t, s, "PutBucketCors", put)
	del := s.c.DeleteBucketCors(ctx, b)
	answer(t, s, "DeleteBucketCors", del)
	if KindOf(get) != s.expect.cors && KindOf(put) != s.expect.cors {
		t.Errorf("GetBucketCors %v, PutBucketCors %v; want one of them %v", get, put, s.expect.cors)
	}
	if put == nil {
		t.Errorf("PutBucketCors succeeded on a store expected to have no CORS")
	}
	if _, err := s.c.HeadBucket(ctx, b); err != nil {
		t.Errorf("the bucket after PutBucketCors and DeleteBucketCors: %v", err)
	}
	if got, err := s.c.GetObject(ctx, b, "kept", 16); err != nil || string(got) != "kept" {
		t.Errorf("the bucket's object after PutBucketCors and DeleteBucketCors: %q, %v", got, err)
	}
	read := "GET answers " + codeOf(get)
	if get == nil {
		read = "GET reads none"
	}
	cell := "no: " + read + ", PUT " + codeOf(put) + ", DELETE " + codeOf(del) + " (NotSupportedByStore)"
	observedTable.Set(t, s.kind, rowCORS, cell)
}

// sortedCORSLists is rules with each list sorted, the rules in their order.
func sortedCORSLists(rules []CORSRule) []CORSRule {
	out := make([]CORSRule, 0, len(rules))
	for _, r := range rules {
		r.AllowedOrigins, r.AllowedMethods = slices.Sorted(slices.Values(r.AllowedOrigins)), slices.Sorted(slices.Values(r.AllowedMethods))
		r.AllowedHeaders, r.ExposeHeaders = slices.Sorted(slices.Values(r.AllowedHeaders)), slices.Sorted(slices.Values(r.ExposeHeaders))
		out = append(out, r)
	}
	return out
}

func fmtCORS(rules []CORSRule) string {
	var out []string
	for _, r := range rules {
		age := "-"
		if r.MaxAgeSeconds != nil {
			age = fmt.Sprint(*r.MaxAgeSeconds)
		}
		out = append(out, fmt.Sprintf("{%q origins=%q methods=%q headers=%q expose=%q maxAge=%s}",
			r.ID, r.AllowedOrigins, r.AllowedMethods, r.AllowedHeaders, r.ExposeHeaders, age))
	}
	return "[" + strings.Join(out, " ") + "]"
}
