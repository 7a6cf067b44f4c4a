package storagebucket

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/guardrail"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// A move configures its target from the spec. What the bucket has on its source that
// the spec does not declare (the store admin's lifecycle rules, tags, policy or CORS,
// or those an adopted bucket came with) would be left behind unseen, so the plan
// reads them (decideUndeclared) and the move goes on only once a choice is made:
// spec.move.undeclaredSettings, else the retirement's spec.retire.undeclaredSettings.
// Carry holds them to the target's guardrails as declared settings are held, before
// anything is created there, and applies them right after the target is made
// (carryUndeclared), before any object is copied; status.move.carried records them,
// and status.carried from the switch on, which keeps the configuration step on the new
// home from taking them for drift (managedConfig). Drop goes on without them, and says
// what it left.

// undeclaredSettings is what a bucket has that its claim's spec does not declare: the
// tags whose keys the spec does not name (the store's own aws: tags and the operator's
// bucketkeeper.io/ ones aside), the lifecycle rules whose IDs it does not name, and the
// policy (without the freeze of a move) and CORS configuration when it names none.
type undeclaredSettings struct {
	tags   map[string]string
	rules  []s3.LifecycleRule
	policy string
	cors   []s3.CORSRule
}

func (u undeclaredSettings) empty() bool {
	return len(u.tags) == 0 && len(u.rules) == 0 && u.policy == "" && len(u.cors) == 0
}

// names says what was found, by setting and count, never by value: a tag's value may
// be anything, and the message stays short however much the bucket has.
func (u undeclaredSettings) names() []string {
	var out []string
	if n := len(u.tags); n > 0 {
		out = append(out, fmt.Sprintf("%s (%d)", bkv1.UndeclaredSettingTags, n))
	}
	if n := len(u.rules); n > 0 {
		out = append(out, fmt.Sprintf("%s (%s)", bkv1.UndeclaredSettingLifecycle, rulesCount(n)))
	}
	if u.policy != "" {
		out = append(out, bkv1.UndeclaredSettingPolicy)
	}
	if n := len(u.cors); n > 0 {
		out = append(out, fmt.Sprintf("%s (%s)", bkv1.UndeclaredSettingCORS, rulesCount(n)))
	}
	return out
}

func rulesCount(n int) string {
	if n == 1 {
		return "1 rule"
	}
	return fmt.Sprintf("%d rules", n)
}

// readUndeclared reads the settings of bucket that sb's spec does not declare, with the
// calls the configuration step reads them with. A setting the store does not have
// (NotImplemented), or a CORS configuration the operator may not read (as corsSetting
// allows), is none. So is one the configuration step would remove as drift
// (managedConfig): on a bucket the claim created everything is the operator's but what
// a move carried there, so only what the store's admin added since (and the next sync
// removes anyway) is found there, and none of it waits for a choice; on an adopted
// bucket, what it came with.
func readUndeclared(ctx context.Context, c s3.Client, bucket string, sb *bkv1.StorageBucket) (undeclaredSettings, error) {
	var u undeclaredSettings
	mine := managedConfigOf(sb, bucket)
	tags, err := c.GetBucketTagging(ctx, bucket)
	if err != nil {
		return u, reconcile.AsStepError(err, fmt.Sprintf("reading the tags of bucket %q", bucket))
	}
	for k, v := range tags {
		if _, named := sb.Spec.Tags[k]; named || mine.tagIsMine(k) || strings.HasPrefix(k, bkv1.SystemTagPrefix) || strings.HasPrefix(k, bkv1.ReservedTagPrefix) {
			continue
		}
		if u.tags == nil {
			u.tags = map[string]string{}
		}
		u.tags[k] = v
	}
	rules, err := c.GetBucketLifecycle(ctx, bucket)
	if err != nil && s3.KindOf(err) != s3.KindNotImplemented {
		return u, reconcile.AsStepError(err, fmt.Sprintf("reading the lifecycle of bucket %q", bucket))
	}
	declared := map[string]bool{}
	for _, r := range lifecycleRules(sb.Spec.Lifecycle) {
		declared[r.ID] = true
	}
	for _, r := range rules {
		if !declared[r.ID] && !mine.ruleIsMine(r.ID) {
			u.rules = append(u.rules, r)
		}
	}
	if policyDocument(sb.Spec.Policy) == "" && !mine.ownsPolicy() {
		doc, err := c.GetBucketPolicy(ctx, bucket)
		if err != nil && s3.KindOf(err) != s3.KindNotImplemented {
			return u, reconcile.AsStepError(err, fmt.Sprintf("reading the policy of bucket %q", bucket))
		}
		// The freeze is the move's own: what is left of the policy without it.
		// A document that does not parse is kept whole, for the guardrails to judge.
		if rest, none, err := withoutFreeze(doc); err != nil {
			u.policy = doc
		} else if !none {
			u.policy = rest
		}
	}
	if len(sb.Spec.CORS) == 0 && !mine.ownsCORS() {
		cors, err := c.GetBucketCors(ctx, bucket)
		if k := s3.KindOf(err); err != nil && k != s3.KindNotImplemented && k != s3.KindAccessDenied {
			return u, reconcile.AsStepError(err, fmt.Sprintf("reading the CORS configuration of bucket %q", bucket))
		}
		u.cors = cors
	}
	return u, nil
}

// undeclaredChoice is the choice that applies to the claim's move: its own
// spec.move.undeclaredSettings, else the retirement's that moves it; where says where
// to set one, for the message of a move that waits.
func undeclaredChoice(scope *bucketScope) (choice bkv1.UndeclaredSettings, where string) {
	sb := scope.sb
	if sb.Spec.Move != nil && sb.Spec.Move.UndeclaredSettings != "" {
		return sb.Spec.Move.UndeclaredSettings, ""
	}
	where = "spec.move.undeclaredSettings"
	if d := scope.dest; d.retirement != nil {
		if d.undeclared != "" {
			return d.undeclared, ""
		}
		where += fmt.Sprintf(" (or ObjectStore %s's spec.retire.undeclaredSettings)", d.retirement.From)
	}
	return "", where
}

// carriedRefusal holds the settings a move would carry to the guardrails of the
// target store, as checkGuardrails holds the spec's: a tenant cannot have the move
// copy what the target would refuse if the spec declared it (a public policy, one
// naming other buckets or accounts, tags the store would not take). setting names what
// is refused; u.policy becomes the canonical policy the guardrails accepted, the one to
// send. own are the ownership tags the target bucket carries beside them.
func carriedRefusal(u *undeclaredSettings, sb *bkv1.StorageBucket, store *bkv1.ObjectStore, bucket string, own map[string]string) (setting string, refusal *reconcile.StepError) {
	rails := &store.Spec.Guardrails
	var refused *guardrail.PolicyError
	if err := guardrail.CheckTags(u.tags); errors.As(err, &refused) {
		return bkv1.UndeclaredSettingTags, reconcile.Terminalf(bkv1.ReasonInvalidTags, "%s", refused.Message)
	}
	if n := len(u.tags) + len(sb.Spec.Tags) + len(own); len(u.tags) > 0 && n > bkv1.MaxBucketTags {
		return bkv1.UndeclaredSettingTags, reconcile.Terminalf(bkv1.ReasonInvalidTags, "the bucket would carry %d tags (the spec's, the ownership tags and %d carried); S3 allows %d", n, len(u.tags), bkv1.MaxBucketTags)
	}
	if u.policy != "" {
		report, err := guardrail.InspectPolicy([]byte(u.policy), bucket, rails.PolicyPrincipalAccounts)
		if err != nil {
			message := err.Error()
			if errors.As(err, &refused) {
				message = refused.Message
			}
			return bkv1.UndeclaredSettingPolicy, reconcile.Terminalf(bkv1.ReasonPolicyNotAllowed, "%s", message)
		}
		if report.Public != "" && !rails.AllowPublicBuckets {
			return bkv1.UndeclaredSettingPolicy, reconcile.Terminalf(bkv1.ReasonPublicAccessNotAllowed, "the policy grants %s to %s: not one specific identity, so the bucket would be public, which needs guardrails.allowPublicBuckets",
				report.Public, report.PublicPrincipal)
		}
		u.policy = report.Canonical
	}
	return "", nil
}

// carryRefused is the move's refusal of a setting it would carry.
func carryRefused(store, setting string, refusal *reconcile.StepError, after string) *reconcile.StepError {
	return reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "ObjectStore %q refuses the %s the move would carry there (spec.move.undeclaredSettings: Carry), by its guardrail %s: %s; %s",
		store, setting, refusal.Reason, refusal.Message, after)
}

// decideUndeclared runs once the plan is made, before anything is created on the
// target: it reads what the source has that the spec does not declare and applies the
// choice. A move with no choice waits, and one whose carried settings the target
// refuses is refused; either gives its slot back (yieldSlot) and says why in Stalled,
// or in StoreRetired for a retirement's move. nil: the move goes on.
func (r *Reconciler) decideUndeclared(ctx context.Context, scope *bucketScope, t *moveTargetScope, m *bkv1.MoveStatus) *moveStep {
	u, err := readUndeclared(ctx, scope.s3, scope.bucket, scope.sb)
	if err != nil {
		step := moveWait(m, err)
		return &step
	}
	m.Undeclared, m.UndeclaredSettings, m.Carried = u.names(), "", nil
	if u.empty() {
		return nil
	}
	choice, where := undeclaredChoice(scope)
	found := strings.Join(m.Undeclared, ", ")
	switch choice {
	case bkv1.UndeclaredSettingsCarry:
		if setting, refusal := carriedRefusal(&u, scope.sb, t.store, t.bucket, scope.owner.tags()); refusal != nil {
			r.yieldSlot(ctx, scope, m)
			return &moveStep{err: carryRefused(t.store.Name, setting, refusal, "nothing was created there")}
		}
		r.Recorder.Eventf(scope.sb, nil, corev1.EventTypeNormal, bkv1.ReasonMoving, "Move", "carrying the settings the spec does not declare to ObjectStore %s: %s", m.To, found)
	case bkv1.UndeclaredSettingsDrop:
		r.Recorder.Eventf(scope.sb, nil, corev1.EventTypeNormal, bkv1.ReasonMoving, "Move", "leaving the settings the spec does not declare on ObjectStore %s (undeclaredSettings: Drop): %s", m.From, found)
	default:
		r.yieldSlot(ctx, scope, m)
		return &moveStep{err: reconcile.Terminalf(bkv1.ReasonUndeclaredSettings,
			"bucket %q has settings on ObjectStore %s that the spec does not declare: %s; set %s to Carry (apply them on ObjectStore %s too) or Drop (leave them behind); the move waits, nothing was created there",
			scope.bucket, m.From, found, where, m.To)}
	}
	m.UndeclaredSettings = choice
	return nil
}

// carryUndeclared applies to the target bucket what a Carry move carries, read from
// the source again and held to the target's guardrails again (the source may have
// changed since the plan), and records it in status.move.carried. It runs once the
// target is made this claim's (ensureMoveTarget), before any object is copied into
// it, and again after a restart: every write is of what the target lacks, merged into
// what it has (the spec's and the ownership tags, the rules of the spec win).
func carryUndeclared(ctx context.Context, scope *bucketScope, t *moveTargetScope, m *bkv1.MoveStatus) error {
	if m.UndeclaredSettings != bkv1.UndeclaredSettingsCarry {
		return nil
	}
	u, err := readUndeclared(ctx, scope.s3, scope.bucket, scope.sb)
	if err != nil {
		return err
	}
	if setting, refusal := carriedRefusal(&u, scope.sb, t.store, t.bucket, scope.owner.tags()); refusal != nil {
		return carryRefused(t.store.Name, setting, refusal, "the settings the source has changed since the plan, and nothing more of them is carried")
	}
	on := fmt.Sprintf("bucket %q of ObjectStore %q", t.bucket, t.store.Name)
	if len(u.tags) > 0 {
		have, err := t.s3.GetBucketTagging(ctx, t.bucket)
		if err != nil {
			return reconcile.AsStepError(err, "reading the tags of "+on)
		}
		want := withoutSystemTags(have)
		for k, v := range u.tags {
			if _, ok := want[k]; !ok {
				want[k] = v
			}
		}
		if !maps.Equal(withoutSystemTags(have), want) {
			if err := t.s3.PutBucketTagging(ctx, t.bucket, want); err != nil {
				return reconcile.AsStepError(err, "carrying the tags to "+on)
			}
		}
	}
	if len(u.rules) > 0 {
		have, err := t.s3.GetBucketLifecycle(ctx, t.bucket)
		if err != nil {
			return reconcile.AsStepError(err, "reading the lifecycle of "+on)
		}
		merged := slices.Clone(have)
		for _, r := range u.rules {
			if !slices.ContainsFunc(have, func(h s3.LifecycleRule) bool { return h.ID == r.ID }) {
				merged = append(merged, r)
			}
		}
		if len(merged) > len(have) {
			if err := t.s3.PutBucketLifecycle(ctx, t.bucket, sortedRules(merged)); err != nil {
				return reconcile.AsStepError(err, "carrying the lifecycle rules to "+on)
			}
		}
	}
	if u.policy != "" {
		if _, err := policySetting(u.policy)(ctx, t.s3, t.bucket); err != nil {
			return reconcile.AsStepError(err, "carrying the policy to "+on)
		}
	}
	if len(u.cors) > 0 {
		if _, err := corsSetting(u.cors)(ctx, t.s3, t.bucket); err != nil {
			return reconcile.AsStepError(err, "carrying the CORS configuration to "+on)
		}
	}
	m.Carried = carriedRecord(u, m.To)
	return nil
}

// carriedRecord is the record of what was carried to store, its names as
// status.applied records them.
func carriedRecord(u undeclaredSettings, store string) *bkv1.CarriedSettings {
	if u.empty() {
		return nil
	}
	c := &bkv1.CarriedSettings{ObjectStore: store, Policy: u.policy != "", CORS: len(u.cors) > 0}
	for k := range u.tags {
		c.TagKeys = append(c.TagKeys, appliedName(k))
	}
	for _, r := range u.rules {
		c.LifecycleRules = append(c.LifecycleRules, appliedName(r.ID))
	}
	slices.Sort(c.TagKeys)
	slices.Sort(c.LifecycleRules)
	c.TagKeys, c.LifecycleRules = slices.Compact(c.TagKeys), slices.Compact(c.LifecycleRules)
	return c
}

// carriedAfterSpec is the record of carried settings once the spec declares some of
// them: what the spec names is the spec's from then on (removed, as drift or as the
// spec drops it, under the rules of managedConfig), and leaves the record; nil once
// nothing is left of it.
func carriedAfterSpec(c *bkv1.CarriedSettings, spec *bkv1.StorageBucketSpec) *bkv1.CarriedSettings {
	if c == nil {
		return nil
	}
	out := c.DeepCopy()
	out.TagKeys = slices.DeleteFunc(out.TagKeys, func(k string) bool {
		return slices.ContainsFunc(slices.Collect(maps.Keys(spec.Tags)), func(s string) bool { return appliedName(s) == k })
	})
	named := map[string]bool{}
	for _, r := range lifecycleRules(spec.Lifecycle) {
		named[appliedName(r.ID)] = true
	}
	out.LifecycleRules = slices.DeleteFunc(out.LifecycleRules, func(id string) bool { return named[id] })
	out.Policy = out.Policy && policyDocument(spec.Policy) == ""
	out.CORS = out.CORS && len(spec.CORS) == 0
	if len(out.TagKeys) == 0 && len(out.LifecycleRules) == 0 && !out.Policy && !out.CORS {
		return nil
	}
	if len(out.TagKeys) == 0 {
		out.TagKeys = nil
	}
	if len(out.LifecycleRules) == 0 {
		out.LifecycleRules = nil
	}
	return out
}

// undeclaredNote is what the Done message adds about the settings the move found.
func undeclaredNote(m *bkv1.MoveStatus) string {
	if len(m.Undeclared) == 0 {
		return ""
	}
	switch m.UndeclaredSettings {
	case bkv1.UndeclaredSettingsCarry:
		return "; carried the settings the spec does not declare (status.carried): " + strings.Join(m.Undeclared, ", ")
	case bkv1.UndeclaredSettingsDrop:
		return "; left the settings the spec does not declare behind (undeclaredSettings: Drop): " + strings.Join(m.Undeclared, ", ")
	}
	return ""
}
