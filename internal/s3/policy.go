package s3

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// EquivalentPolicies reports whether two bucket policy documents say the
// same thing, so a controller can compare the policy it wants with what
// GetBucketPolicy returns. Stores rewrite policies on the way in: SeaweedFS
// turns ["s3:GetObject"] into "s3:GetObject", AWS reorders and reformats.
// IAM policy arrays have set semantics and a one-element array means the
// same as its element, so both documents are compared after:
//   - whitespace and key order are dropped (decoded, not compared as text);
//   - every array is sorted and deduplicated, then a one-element array is
//     replaced by its element.
//
// An error means one of the documents is not JSON.
func EquivalentPolicies(a, b string) (bool, error) {
	ca, err := canonicalPolicy(a)
	if err != nil {
		return false, fmt.Errorf("first policy: %w", err)
	}
	cb, err := canonicalPolicy(b)
	if err != nil {
		return false, fmt.Errorf("second policy: %w", err)
	}
	return bytes.Equal(ca, cb), nil
}

func canonicalPolicy(doc string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(canonicalJSON(v))
}

// canonicalJSON rewrites arrays as described on EquivalentPolicies. Maps
// need nothing: encoding/json sorts their keys.
func canonicalJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = canonicalJSON(e)
		}
		return x
	case []any:
		type item struct {
			v   any
			key string
		}
		items := make([]item, 0, len(x))
		seen := map[string]bool{}
		for _, e := range x {
			e = canonicalJSON(e)
			b, _ := json.Marshal(e)
			if !seen[string(b)] {
				seen[string(b)] = true
				items = append(items, item{e, string(b)})
			}
		}
		sort.Slice(items, func(i, j int) bool { return items[i].key < items[j].key })
		if len(items) == 1 {
			return items[0].v
		}
		out := make([]any, len(items))
		for i, it := range items {
			out[i] = it.v
		}
		return out
	}
	return v
}
