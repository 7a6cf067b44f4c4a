package iam

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestWithBucketFrozen: the freeze a move writes into a user's policy as the store has
// it is the one MinIOPolicyDocument renders for the same grants frozen (compared as
// policies, not text), so neither the access controller nor the move undoes the
// other's; freezing twice changes nothing, thawing gives the policy back, and another
// bucket's freeze stays. PolicyDocument (the stores whose bucket policies bind keys)
// renders no freeze.
func TestWithBucketFrozen(t *testing.T) {
	grants := []Grant{{Bucket: "a", Mode: ReadWrite}, {Bucket: "b", Mode: ReadOnly}, {Bucket: "c", Mode: ReadWrite}}
	render := func(frozen ...string) string {
		t.Helper()
		gs := slices.Clone(grants)
		for i := range gs {
			gs[i].Frozen = slices.Contains(frozen, gs[i].Bucket)
		}
		doc, err := MinIOPolicyDocument(gs)
		must(t, "MinIOPolicyDocument", err)
		return doc
	}
	equivalent := func(what, got, want string) {
		t.Helper()
		if same, err := s3.EquivalentPolicies(got, want); err != nil || !same {
			t.Errorf("%s: %s, want %s (%v)", what, got, want, err)
		}
	}
	plain := render()
	a, err := WithBucketFrozen(plain, "a", true)
	must(t, "freeze a", err)
	equivalent("a frozen", a, render("a"))
	again, err := WithBucketFrozen(a, "a", true)
	must(t, "freeze a again", err)
	equivalent("a frozen twice", again, a)
	ac, err := WithBucketFrozen(a, "c", true)
	must(t, "freeze c", err)
	equivalent("a and c frozen", ac, render("a", "c"))
	c, err := WithBucketFrozen(ac, "a", false)
	must(t, "thaw a", err)
	equivalent("a thawed, c frozen", c, render("c"))
	none, err := WithBucketFrozen(c, "c", false)
	must(t, "thaw c", err)
	equivalent("everything thawed", none, plain)

	var parsed struct {
		Statement []struct {
			Sid, Effect      string
			Action, Resource []string
		}
	}
	must(t, "parse", json.Unmarshal([]byte(render("a")), &parsed))
	deny := parsed.Statement[len(parsed.Statement)-1]
	if deny.Sid != FreezeSid || deny.Effect != "Deny" || !slices.Equal(deny.Action, FreezeActions) || !slices.Equal(deny.Resource, []string{"arn:aws:s3:::a/*"}) {
		t.Errorf("the freeze statement: %+v", deny)
	}
	frozenGrants := slices.Clone(grants)
	frozenGrants[0].Frozen = true
	p1, _ := PolicyDocument(grants)
	p2, _ := PolicyDocument(frozenGrants)
	if p1 != p2 {
		t.Errorf("PolicyDocument renders a freeze: %s", p2)
	}
	if _, err := WithBucketFrozen("not json", "a", true); err == nil {
		t.Error("a policy that is not JSON was frozen")
	}
}

// TestMinIOUserPolicy: the driver reads a user's canned policy and rewrites it in place;
// a user without one reads as "" and is given none.
func TestMinIOUserPolicy(t *testing.T) {
	f := newFakeMinIO(t)
	ctx := t.Context()
	d := f.driver(t, f.secret, nil)
	editor, ok := PolicyEditorOf(d)
	if !ok {
		t.Fatal("the MinIO driver edits no policy")
	}
	user := UserName("c", randomHex(16))
	must(t, "EnsureUser", d.EnsureUser(ctx, user))
	if doc, err := editor.UserPolicy(ctx, user); err != nil || doc != "" {
		t.Fatalf("a user without a policy: %q, %v", doc, err)
	}
	must(t, "PutUserPolicyDocument", editor.PutUserPolicyDocument(ctx, user, `{"Version":"2012-10-17","Statement":[]}`))
	if n := f.count("add-canned-policy"); n != 0 {
		t.Errorf("a policy was made for a user without one (%d writes)", n)
	}
	grants := []Grant{{Bucket: "bucket-a", Mode: ReadWrite}}
	must(t, "PutPolicy", d.PutPolicy(ctx, user, grants))
	doc, err := editor.UserPolicy(ctx, user)
	must(t, "UserPolicy", err)
	want, _ := MinIOPolicyDocument(grants)
	if same, err := s3.EquivalentPolicies(doc, want); err != nil || !same {
		t.Errorf("UserPolicy: %s, want %s (%v)", doc, want, err)
	}
	frozen, err := WithBucketFrozen(doc, "bucket-a", true)
	must(t, "WithBucketFrozen", err)
	must(t, "PutUserPolicyDocument", editor.PutUserPolicyDocument(ctx, user, frozen))
	grants[0].Frozen = true
	want, _ = MinIOPolicyDocument(grants)
	doc, err = editor.UserPolicy(ctx, user)
	must(t, "UserPolicy", err)
	if same, err := s3.EquivalentPolicies(doc, want); err != nil || !same {
		t.Errorf("after the freeze: %s, want %s (%v)", doc, want, err)
	}
	if doc, err := editor.UserPolicy(ctx, UserName("c", randomHex(16))); err != nil || doc != "" {
		t.Errorf("a missing user: %q, %v", doc, err)
	}
}
