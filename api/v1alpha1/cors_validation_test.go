package v1alpha1_test

import (
	"fmt"
	"strings"
	"testing"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// corsRule is a CORS rule of n values in each list, each value of length size.
func corsRule(n, size int) map[string]any {
	values := func(prefix string) []any {
		out := make([]any, 0, n)
		for i := range n {
			v := fmt.Sprintf("%s%d-", prefix, i)
			out = append(out, v+strings.Repeat("x", size-len(v)))
		}
		return out
	}
	return map[string]any{
		"id":             strings.Repeat("r", 255),
		"allowedOrigins": values("https://o"),
		"allowedMethods": []any{"GET", "PUT", "POST", "DELETE", "HEAD"},
		"allowedHeaders": values("h"),
		"exposeHeaders":  values("e"),
		"maxAgeSeconds":  604800,
	}
}

func corsRules(n int, rule map[string]any) []any {
	out := make([]any, 0, n)
	for range n {
		out = append(out, rule)
	}
	return out
}

// TestStorageBucketCORSAdmission holds spec.cors to the bounds of names.go: the largest
// CORS configuration they allow is accepted, and one more rule, value or character in
// any list is refused, so a tenant cannot hand the operator unbounded input.
func TestStorageBucketCORSAdmission(t *testing.T) {
	ns := newNamespace(t)
	largest := corsRule(bkv1.MaxCORSValues, bkv1.MaxCORSValueLength)
	t.Run("the largest allowed", func(t *testing.T) {
		err := k8s.Create(testCtx(t), storageBucket(ns, "cors-largest", with(validBucketSpec(), "cors", corsRules(bkv1.MaxCORSRules, largest))))
		if err != nil {
			t.Fatalf("the largest CORS configuration the bounds allow was refused: %v", err)
		}
	})
	mutated := func(key string, value any) []any {
		r := map[string]any{}
		for k, v := range largest {
			r[k] = v
		}
		if value == nil {
			delete(r, key)
		} else {
			r[key] = value
		}
		return []any{r}
	}
	over := corsRule(bkv1.MaxCORSValues+1, 16)
	long := corsRule(1, bkv1.MaxCORSValueLength+1)
	cases := []struct {
		name string
		cors []any
		want string
	}{
		{"one rule too many", corsRules(bkv1.MaxCORSRules+1, corsRule(1, 16)), fmt.Sprintf("spec.cors: Too many: %d: must have at most %d items", bkv1.MaxCORSRules+1, bkv1.MaxCORSRules)},
		{"one origin too many", mutated("allowedOrigins", over["allowedOrigins"]), fmt.Sprintf("must have at most %d items", bkv1.MaxCORSValues)},
		{"one allowed header too many", mutated("allowedHeaders", over["allowedHeaders"]), fmt.Sprintf("must have at most %d items", bkv1.MaxCORSValues)},
		{"one exposed header too many", mutated("exposeHeaders", over["exposeHeaders"]), fmt.Sprintf("must have at most %d items", bkv1.MaxCORSValues)},
		{"an origin too long", mutated("allowedOrigins", long["allowedOrigins"]), fmt.Sprintf("may not be more than %d bytes", bkv1.MaxCORSValueLength)},
		{"an allowed header too long", mutated("allowedHeaders", long["allowedHeaders"]), fmt.Sprintf("may not be more than %d bytes", bkv1.MaxCORSValueLength)},
		{"an exposed header too long", mutated("exposeHeaders", long["exposeHeaders"]), fmt.Sprintf("may not be more than %d bytes", bkv1.MaxCORSValueLength)},
		{"an id too long", mutated("id", strings.Repeat("r", 256)), "may not be more than 255 bytes"},
		{"no origin", mutated("allowedOrigins", nil), "allowedOrigins: Required value"},
		{"an empty origin", mutated("allowedOrigins", []any{""}), "should be at least 1 chars long"},
		{"no method", mutated("allowedMethods", []any{}), "should have at least 1 items"},
		{"an unknown method", mutated("allowedMethods", []any{"PATCH"}), `supported values: "GET", "PUT", "POST", "DELETE", "HEAD"`},
		{"a method twice", mutated("allowedMethods", []any{"GET", "GET"}), "Duplicate value"},
		{"a negative max age", mutated("maxAgeSeconds", -1), "should be greater than or equal to 0"},
		{"a max age over a week", mutated("maxAgeSeconds", 604801), "should be less than or equal to 604800"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(testCtx(t), storageBucket(ns, fmt.Sprintf("cors-invalid-%d", i), with(validBucketSpec(), "cors", tc.cors)))
			assertRejected(t, err, tc.want)
		})
	}
}
