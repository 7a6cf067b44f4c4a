package storagebucket

import (
	"strings"
	"testing"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestFreezeStatement: the freeze is added once to whatever policy the bucket has
// (none, a statement list, a single statement), and removing it gives back the
// policy as it was, or nothing when the freeze was all of it.
func TestFreezeStatement(t *testing.T) {
	tenant := `{"Version":"2012-10-17","Statement":[{"Sid":"ReadOnly","Effect":"Allow","Principal":{"AWS":["arn:aws:iam::123456789012:user/app"]},"Action":["s3:GetObject"],"Resource":["arn:aws:s3:::b/*"]}]}`
	single := `{"Version":"2012-10-17","Statement":{"Sid":"Deny","Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/private/*"}}`
	for _, tc := range []struct {
		name, doc  string
		statements int
	}{{"no policy", "", 1}, {"a tenant policy", tenant, 2}, {"a single statement", single, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			frozen, err := withFreeze(tc.doc, "b")
			if err != nil {
				t.Fatal(err)
			}
			again, err := withFreeze(frozen, "b")
			if err != nil {
				t.Fatal(err)
			}
			if same, err := s3.EquivalentPolicies(frozen, again); err != nil || !same {
				t.Errorf("freezing twice: %s, then %s (%v)", frozen, again, err)
			}
			if got := strings.Count(frozen, `"Sid":`); got != tc.statements {
				t.Errorf("frozen policy %s has %d statements, want %d", frozen, got, tc.statements)
			}
			if !strings.Contains(frozen, `"Effect":"Deny","Principal":"*"`) || !strings.Contains(frozen, `arn:aws:s3:::b/*`) {
				t.Errorf("frozen policy %s does not deny every principal the bucket's objects", frozen)
			}
			thawed, empty, err := withoutFreeze(frozen)
			if err != nil {
				t.Fatal(err)
			}
			if empty != (tc.doc == "") {
				t.Errorf("thawed %s: empty %v, want %v", thawed, empty, tc.doc == "")
			}
			if tc.doc != "" {
				if same, err := s3.EquivalentPolicies(thawed, tc.doc); err != nil || !same {
					t.Errorf("thawed %s, want %s (%v)", thawed, tc.doc, err)
				}
			}
			if unchanged, _, _ := withoutFreeze(tc.doc); unchanged != tc.doc {
				t.Errorf("thawing an unfrozen policy changed it: %s", unchanged)
			}
		})
	}
	if _, err := withFreeze("not json", "b"); err == nil {
		t.Error("a policy that is not JSON was frozen")
	}
}
