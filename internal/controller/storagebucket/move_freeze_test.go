package storagebucket

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
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

// TestReclaimMovedBucket: a bucket an earlier move left behind (frozen, tagged
// moved-to) that a move back finds on its target gets back its policy without the
// freeze and its tags without moved-to; once reclaimed, doing it again writes nothing.
func TestReclaimMovedBucket(t *testing.T) {
	tenant := `{"Version":"2012-10-17","Statement":[{"Sid":"ReadOnly","Effect":"Allow","Principal":{"AWS":["arn:aws:iam::123456789012:user/app"]},"Action":["s3:GetObject"],"Resource":["arn:aws:s3:::b/*"]}]}`
	owned := map[string]string{bkv1.TagClaim: "ns/data", bkv1.TagUID: "uid/nsuid", "team": "a"}
	for _, tc := range []struct{ name, policy string }{{"no policy of its own", ""}, {"a tenant policy", tenant}} {
		t.Run(tc.name, func(t *testing.T) {
			frozen, err := withFreeze(tc.policy, "b")
			if err != nil {
				t.Fatal(err)
			}
			left := maps.Clone(owned)
			left[bkv1.TagMovedTo] = "elsewhere/b"
			c := &fakeS3{policy: frozen, tags: maps.Clone(left)}
			if err := reclaimMovedBucket(context.Background(), c, "b", left); err != nil {
				t.Fatal(err)
			}
			if tc.policy == "" && c.policy != "" {
				t.Errorf("policy %s, want none", c.policy)
			} else if tc.policy != "" {
				if same, err := s3.EquivalentPolicies(c.policy, tc.policy); err != nil || !same {
					t.Errorf("policy %s, want %s (%v)", c.policy, tc.policy, err)
				}
			}
			if !maps.Equal(c.tags, owned) {
				t.Errorf("tags %v, want %v", c.tags, owned)
			}
			c.writes = nil
			if err := reclaimMovedBucket(context.Background(), c, "b", maps.Clone(c.tags)); err != nil || len(c.writes) > 0 {
				t.Errorf("reclaiming again: %v, writes %v", err, c.writes)
			}
		})
	}
	failing := &fakeS3{policy: `{"Statement":[{"Sid":"` + bkv1.MoveFreezeSid + `"}]}`, errs: map[string]error{"DeleteBucketPolicy": s3Err("DeleteBucketPolicy", s3.KindAccessDenied)}}
	if err := reclaimMovedBucket(context.Background(), failing, "b", map[string]string{bkv1.TagMovedTo: "x/b"}); err == nil || slices.Contains(failing.writes, "PutBucketTagging") {
		t.Errorf("a freeze that could not be lifted: %v, writes %v; want an error before the tags are touched", err, failing.writes)
	}
}
