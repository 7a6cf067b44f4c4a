package storagebucket

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// grantPolicy lets one identity read bucket "b": what the guardrails accept.
const grantPolicy = `{"Version":"2012-10-17","Statement":[{"Sid":"app","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:user/app"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`

var (
	adminRule = s3.LifecycleRule{ID: "admin-expire", Prefix: "tmp/", ExpirationDays: ptr.To[int32](7)}
	specRule  = s3.LifecycleRule{ID: "spec-rule", Prefix: "logs/", ExpirationDays: ptr.To[int32](30)}
	adminCORS = []s3.CORSRule{{ID: "web", AllowedOrigins: []string{"https://app.example"}, AllowedMethods: []string{"GET"}}}
)

// sourceWithUndeclared is a source bucket holding, beside what the spec of
// specDeclaring declares, a tag, a lifecycle rule, a policy and CORS of the store
// admin's, the operator's own tags and a move's freeze.
func sourceWithUndeclared(t *testing.T) *fakeS3 {
	t.Helper()
	frozen, err := withFreeze(grantPolicy, "b")
	if err != nil {
		t.Fatal(err)
	}
	return &fakeS3{
		tags: map[string]string{"cost-center": "cc-7", "team": "data", bkv1.TagClaim: "team-a/data",
			bkv1.TagMovedTo: "x/b", "aws:cloudformation:stack-name": "s"},
		lifecycle: []s3.LifecycleRule{adminRule, specRule},
		policy:    frozen,
		cors:      adminCORS,
	}
}

// adoptedSpecBucket is newSpecBucket's claim having adopted its bucket: nothing on it
// is the operator's but what the spec declares.
func adoptedSpecBucket() *bkv1.StorageBucket {
	sb := newSpecBucket()
	sb.Status.CreateIntent = nil
	return sb
}

// specDeclaring is an adopting claim whose spec declares the tag "team" and the rule
// "spec-rule".
func specDeclaring() *bkv1.StorageBucket {
	sb := adoptedSpecBucket()
	sb.Spec.Tags = map[string]string{"team": "data"}
	sb.Spec.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{{ID: "spec-rule", Prefix: "logs/", ExpirationDays: ptr.To[int32](30)}}}
	return sb
}

func TestReadUndeclared(t *testing.T) {
	ctx := context.Background()
	t.Run("what the spec leaves out, without the operator's tags and freeze", func(t *testing.T) {
		u, err := readUndeclared(ctx, sourceWithUndeclared(t), "b", specDeclaring())
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(u.tags, map[string]string{"cost-center": "cc-7"}) {
			t.Errorf("tags = %v, want only the admin's cost-center", u.tags)
		}
		if len(u.rules) != 1 || u.rules[0].ID != adminRule.ID {
			t.Errorf("rules = %+v, want only %q", u.rules, adminRule.ID)
		}
		if same, err := s3.EquivalentPolicies(u.policy, grantPolicy); err != nil || !same {
			t.Errorf("policy = %s, want the admin's without the freeze", u.policy)
		}
		if !sameCORS(u.cors, adminCORS) {
			t.Errorf("cors = %+v", u.cors)
		}
		want := []string{"tags (1)", "lifecycle (1 rule)", "policy", "CORS (1 rule)"}
		if got := u.names(); !slices.Equal(got, want) {
			t.Errorf("names = %v, want %v", got, want)
		}
		for _, n := range u.names() {
			if strings.Contains(n, "cc-7") || strings.Contains(n, "arn:") {
				t.Errorf("a name holds a value: %q", n)
			}
		}
	})
	t.Run("a policy that is only the freeze, and a policy or CORS the spec declares, are none", func(t *testing.T) {
		src := sourceWithUndeclared(t)
		src.policy, _ = withFreeze("", "b")
		sb := specDeclaring()
		sb.Spec.CORS = []bkv1.CORSRule{{AllowedOrigins: []string{"https://x"}, AllowedMethods: []bkv1.CORSMethod{"GET"}}}
		u, err := readUndeclared(ctx, src, "b", sb)
		if err != nil {
			t.Fatal(err)
		}
		if u.policy != "" || u.cors != nil {
			t.Errorf("policy %q, cors %+v: want none", u.policy, u.cors)
		}
		sb.Spec.Policy = &apiextensionsv1.JSON{Raw: []byte(grantPolicy)}
		src.policy = grantPolicy
		if u, _ = readUndeclared(ctx, src, "b", sb); u.policy != "" {
			t.Errorf("a policy the spec declares is undeclared: %s", u.policy)
		}
	})
	t.Run("on a bucket the claim created, what the spec leaves out is drift, not undeclared", func(t *testing.T) {
		sb := specDeclaring()
		sb.Status.CreateIntent = newSpecBucket().Status.CreateIntent
		u, err := readUndeclared(ctx, sourceWithUndeclared(t), "b", sb)
		if err != nil || !u.empty() {
			t.Errorf("undeclared = %v (%v): want none, the next sync removes the admin's additions", u.names(), err)
		}
		// What a move carried there is the bucket's own, and found again.
		sb.Status.ObjectStore = "store"
		sb.Status.Carried = &bkv1.CarriedSettings{ObjectStore: "store", TagKeys: []string{"cost-center"}}
		if u, err := readUndeclared(ctx, sourceWithUndeclared(t), "b", sb); err != nil || !maps.Equal(u.tags, map[string]string{"cost-center": "cc-7"}) || len(u.rules) != 0 {
			t.Errorf("undeclared on a bucket holding a carried tag = %v (%v): want the carried tag alone", u.names(), err)
		}
	})
	t.Run("a store without lifecycle or CORS has none; an unreadable policy waits", func(t *testing.T) {
		src := &fakeS3{errs: map[string]error{"GetBucketLifecycle": notImplemented("GetBucketLifecycle"), "GetBucketCors": s3Err("GetBucketCors", s3.KindAccessDenied)}}
		u, err := readUndeclared(ctx, src, "b", adoptedSpecBucket())
		if err != nil || !u.empty() {
			t.Errorf("undeclared = %+v, %v: want none", u, err)
		}
		src.errs["GetBucketPolicy"] = s3Err("GetBucketPolicy", s3.KindAccessDenied)
		if _, err := readUndeclared(ctx, src, "b", adoptedSpecBucket()); err == nil {
			t.Error("a policy the operator cannot read is taken for none")
		}
	})
}

func TestUndeclaredChoice(t *testing.T) {
	sb := newSpecBucket()
	scope := &bucketScope{sb: sb}
	if c, where := undeclaredChoice(scope); c != "" || where != "spec.move.undeclaredSettings" {
		t.Errorf("no choice = %q, %q", c, where)
	}
	scope.dest.retirement = &bkv1.ClaimRetirement{From: "old", Into: "new"}
	if c, where := undeclaredChoice(scope); c != "" || !strings.Contains(where, "ObjectStore old's spec.retire.undeclaredSettings") {
		t.Errorf("a retirement without a choice = %q, %q", c, where)
	}
	scope.dest.undeclared = bkv1.UndeclaredSettingsDrop
	if c, _ := undeclaredChoice(scope); c != bkv1.UndeclaredSettingsDrop {
		t.Errorf("the retirement's choice = %q, want Drop", c)
	}
	sb.Spec.Move = &bkv1.MoveSpec{UndeclaredSettings: bkv1.UndeclaredSettingsCarry}
	if c, _ := undeclaredChoice(scope); c != bkv1.UndeclaredSettingsCarry {
		t.Errorf("the claim's own choice = %q, want Carry (it wins over the retirement's)", c)
	}
}

// TestCarriedSettingsMeetTheTargetsGuardrails is the attack: a tenant sets a policy on
// the source the target's guardrails would refuse (or has one set there), and asks the
// move to carry it. The move is refused by the guardrail's name, before anything is
// created on the target.
func TestCarriedSettingsMeetTheTargetsGuardrails(t *testing.T) {
	sb := adoptedSpecBucket()
	target := &bkv1.ObjectStore{}
	target.Name = "target"
	own := testOwner(sb).tags()
	for _, tc := range []struct {
		name, policy, reason string
		tags                 map[string]string
		allowPublic          bool
	}{
		{name: "public policy", reason: bkv1.ReasonPublicAccessNotAllowed,
			policy: `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`},
		{name: "policy naming another bucket", reason: bkv1.ReasonPolicyNotAllowed,
			policy: `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::audit-logs/*"}]}`},
		{name: "policy that is not a policy", reason: bkv1.ReasonPolicyNotAllowed, policy: `{"Statement":`},
		{name: "a tag S3 would refuse", reason: bkv1.ReasonInvalidTags, tags: map[string]string{"k": "a;b"}},
		{name: "public policy the target allows", allowPublic: true,
			policy: `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`},
		{name: "a specific grant", policy: grantPolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target.Spec.Guardrails.AllowPublicBuckets = tc.allowPublic
			u := undeclaredSettings{policy: tc.policy, tags: tc.tags}
			setting, refusal := carriedRefusal(&u, sb, target, "b", own)
			if tc.reason == "" {
				if refusal != nil {
					t.Fatalf("refused: %v", refusal)
				}
				if same, err := s3.EquivalentPolicies(u.policy, tc.policy); err != nil || !same {
					t.Errorf("the policy to send = %s, want the canonical form of %s", u.policy, tc.policy)
				}
				return
			}
			if refusal == nil || refusal.Reason != tc.reason {
				t.Fatalf("refusal = %v, want %s", refusal, tc.reason)
			}
			msg := carryRefused(target.Name, setting, refusal, "nothing was created there")
			if msg.Reason != bkv1.ReasonMoveNotAllowed || !strings.Contains(msg.Message, tc.reason) || !strings.Contains(msg.Message, setting) {
				t.Errorf("move refusal = %s: %s; want MoveNotAllowed naming %s and the %s", msg.Reason, msg.Message, tc.reason, setting)
			}
		})
	}

	t.Run("a refused policy leaves the target as it was", func(t *testing.T) {
		src := &fakeS3{policy: `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`, tags: map[string]string{"k": "v"}}
		tgt := &fakeS3{}
		m := &bkv1.MoveStatus{To: "target", UndeclaredSettings: bkv1.UndeclaredSettingsCarry}
		err := carryUndeclared(context.Background(), &bucketScope{sb: sb, s3: src, bucket: "b", owner: testOwner(sb)}, &moveTargetScope{store: target, s3: tgt, bucket: "b"}, m)
		if err == nil || !strings.Contains(err.Error(), bkv1.ReasonPublicAccessNotAllowed) {
			t.Fatalf("err = %v, want a refusal naming %s", err, bkv1.ReasonPublicAccessNotAllowed)
		}
		if len(tgt.writes) > 0 || m.Carried != nil {
			t.Errorf("the target was written %v, carried %+v", tgt.writes, m.Carried)
		}
	})
}

func TestCarryUndeclared(t *testing.T) {
	ctx := context.Background()
	sb := specDeclaring()
	target := &bkv1.ObjectStore{}
	target.Name = "target"
	own := testOwner(sb).tags()
	tgtTags := maps.Clone(own)
	tgtTags["team"] = "data"
	tgt := &fakeS3{tags: tgtTags, lifecycle: []s3.LifecycleRule{specRule}}
	m := &bkv1.MoveStatus{From: "source", To: "target", UndeclaredSettings: bkv1.UndeclaredSettingsCarry}
	scope := &bucketScope{sb: sb, s3: sourceWithUndeclared(t), bucket: "b", owner: testOwner(sb)}
	if err := carryUndeclared(ctx, scope, &moveTargetScope{store: target, s3: tgt, bucket: "b"}, m); err != nil {
		t.Fatal(err)
	}
	wantTags := maps.Clone(tgtTags)
	wantTags["cost-center"] = "cc-7"
	if !maps.Equal(tgt.tags, wantTags) {
		t.Errorf("target tags = %v, want %v", tgt.tags, wantTags)
	}
	if ids := ruleIDs(tgt.lifecycle); !slices.Equal(ids, []string{adminRule.ID, specRule.ID}) {
		t.Errorf("target rules = %v", ids)
	}
	if same, err := s3.EquivalentPolicies(tgt.policy, grantPolicy); err != nil || !same {
		t.Errorf("target policy = %s, want the source's without the freeze", tgt.policy)
	}
	if !sameCORS(tgt.cors, adminCORS) {
		t.Errorf("target CORS = %+v", tgt.cors)
	}
	want := &bkv1.CarriedSettings{ObjectStore: "target", TagKeys: []string{"cost-center"}, LifecycleRules: []string{adminRule.ID}, Policy: true, CORS: true}
	if m.Carried == nil || !equalCarried(*m.Carried, *want) {
		t.Errorf("status.move.carried = %+v, want %+v", m.Carried, want)
	}

	t.Run("again, after a restart, writes nothing", func(t *testing.T) {
		tgt.writes = nil
		if err := carryUndeclared(ctx, scope, &moveTargetScope{store: target, s3: tgt, bucket: "b"}, m); err != nil {
			t.Fatal(err)
		}
		if len(tgt.writes) > 0 {
			t.Errorf("writes %v", tgt.writes)
		}
	})
	t.Run("Drop carries nothing", func(t *testing.T) {
		tgt := &fakeS3{}
		m := &bkv1.MoveStatus{To: "target", UndeclaredSettings: bkv1.UndeclaredSettingsDrop}
		if err := carryUndeclared(ctx, scope, &moveTargetScope{store: target, s3: tgt, bucket: "b"}, m); err != nil || len(tgt.reads)+len(tgt.writes) > 0 || m.Carried != nil {
			t.Errorf("err %v, reads %v, writes %v, carried %+v", err, tgt.reads, tgt.writes, m.Carried)
		}
	})
}

// TestCarriedSettingsAreNotDrift: on a bucket the claim created, whatever the spec
// does not name is removed, but not what a move carried to its home (status.carried);
// on another store that record counts for nothing.
func TestCarriedSettingsAreNotDrift(t *testing.T) {
	sb := newSpecBucket() // exclusive: everything not in the spec is drift
	sb.Status.ObjectStore = "target"
	sb.Status.Carried = &bkv1.CarriedSettings{ObjectStore: "target", TagKeys: []string{"cost-center"}, LifecycleRules: []string{adminRule.ID}, Policy: true, CORS: true}
	own := testOwner(sb).tags()
	bucketOnTarget := func() *fakeS3 {
		tags := maps.Clone(own)
		tags["cost-center"], tags["stray"] = "cc-7", "x"
		return &fakeS3{tags: tags, lifecycle: []s3.LifecycleRule{adminRule, {ID: "stray-rule", ExpirationDays: ptr.To[int32](1)}}, policy: grantPolicy, cors: adminCORS}
	}
	f := bucketOnTarget()
	applyAll(t, sb, f)
	if f.tags["cost-center"] != "cc-7" || f.tags["stray"] != "" {
		t.Errorf("tags = %v: want the carried cost-center kept and the stray removed", f.tags)
	}
	if ids := ruleIDs(f.lifecycle); !slices.Equal(ids, []string{adminRule.ID}) {
		t.Errorf("rules = %v: want the carried one only", ids)
	}
	if f.policy == "" || f.cors == nil {
		t.Errorf("policy %q, CORS %+v: the carried ones were removed", f.policy, f.cors)
	}

	sb.Status.ObjectStore = "elsewhere" // carried to another store: nothing here is kept
	f = bucketOnTarget()
	applyAll(t, sb, f)
	if len(f.tags) != len(own) || len(f.lifecycle) > 0 || f.policy != "" || f.cors != nil {
		t.Errorf("off the store they were carried to, the carried settings are kept: tags %v, rules %v, policy %q, CORS %+v", f.tags, ruleIDs(f.lifecycle), f.policy, f.cors)
	}
}

func TestCarriedAfterSpec(t *testing.T) {
	c := &bkv1.CarriedSettings{ObjectStore: "s", TagKeys: []string{"a", "b"}, LifecycleRules: []string{"r1", "r2"}, Policy: true, CORS: true}
	spec := &bkv1.StorageBucketSpec{Tags: map[string]string{"a": "1"}, Lifecycle: &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{{ID: "r1", ExpirationDays: ptr.To[int32](1)}}},
		Policy: &apiextensionsv1.JSON{Raw: []byte(grantPolicy)}}
	got := carriedAfterSpec(c, spec)
	want := bkv1.CarriedSettings{ObjectStore: "s", TagKeys: []string{"b"}, LifecycleRules: []string{"r2"}, CORS: true}
	if got == nil || !equalCarried(*got, want) {
		t.Errorf("carriedAfterSpec = %+v, want %+v", got, want)
	}
	if c.Policy != true || len(c.TagKeys) != 2 {
		t.Errorf("its input changed: %+v", c)
	}
	spec.Tags["b"], spec.CORS = "2", []bkv1.CORSRule{{AllowedOrigins: []string{"*"}, AllowedMethods: []bkv1.CORSMethod{"GET"}}}
	spec.Lifecycle.Rules = append(spec.Lifecycle.Rules, bkv1.LifecycleRule{ID: "r2", ExpirationDays: ptr.To[int32](1)})
	if got := carriedAfterSpec(c, spec); got != nil {
		t.Errorf("everything declared, the record is %+v, want none", got)
	}
}

func TestUndeclaredNote(t *testing.T) {
	m := &bkv1.MoveStatus{Undeclared: []string{"tags (1)", "CORS (1 rule)"}, UndeclaredSettings: bkv1.UndeclaredSettingsDrop}
	if n := undeclaredNote(m); !strings.Contains(n, "Drop") || !strings.Contains(n, "tags (1), CORS (1 rule)") {
		t.Errorf("note = %q", n)
	}
	m.Undeclared = nil
	if n := undeclaredNote(m); n != "" {
		t.Errorf("nothing found, note = %q", n)
	}
}

func ruleIDs(rules []s3.LifecycleRule) []string {
	var out []string
	for _, r := range rules {
		out = append(out, r.ID)
	}
	return out
}

func equalCarried(a, b bkv1.CarriedSettings) bool {
	return a.ObjectStore == b.ObjectStore && slices.Equal(a.TagKeys, b.TagKeys) && slices.Equal(a.LifecycleRules, b.LifecycleRules) && a.Policy == b.Policy && a.CORS == b.CORS
}
