package storagebucket

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"reflect"
	"slices"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// managedConfig is what of a bucket's configuration the operator manages, which decides
// what a setting absent from the spec means.
//
// exclusive: this StorageBucket created the bucket (status.createIntent, which tenants
// cannot write, names it), so nothing on it is anyone else's: whatever the spec does not
// name is removed, as drift. Otherwise (an adopted bucket, a released bucket bound again,
// or one created before status.createIntent existed) only what status.applied lists is
// the operator's; everything else found on the bucket is left alone.
//
// Crash windows: the record is written with the pass's status write, after the store
// was changed. A crash in between loses at most the record of what this pass added;
// when the spec still names it, the next pass records it again. Only a setting added and
// then dropped from the spec across such a crash is left behind (a tag or rule on an
// adopted bucket, versioning on any): erring towards leaving alone, never towards
// deleting what is not the operator's. A removal crashed on stays recorded and is simply
// repeated.
//
// carried: what a move carried to the bucket's home that the spec does not declare
// (status.carried, spec.move.undeclaredSettings: Carry) is the bucket's, not the
// operator's, even on an exclusive bucket: never drift, it is left as it is, as what
// an adopted bucket came with. Only on the store it was carried to.
type managedConfig struct {
	exclusive bool
	applied   bkv1.AppliedConfiguration
	carried   bkv1.CarriedSettings
}

func managedConfigOf(sb *bkv1.StorageBucket, bucket string) managedConfig {
	m := managedConfig{exclusive: createIntended(sb, bucket)}
	if a := sb.Status.Applied; a != nil {
		m.applied = *a.DeepCopy()
	}
	if c := sb.Status.Carried; c != nil && c.ObjectStore == sb.HomeStore() {
		m.carried = *c.DeepCopy()
	}
	return m
}

// tagIsMine says whether a tag key found on the bucket is the operator's to remove when
// the spec does not name it.
func (m managedConfig) tagIsMine(key string) bool {
	name := appliedName(key)
	return m.exclusive && !slices.Contains(m.carried.TagKeys, name) || slices.Contains(m.applied.TagKeys, name)
}

// ruleIsMine says the same of a lifecycle rule ID.
func (m managedConfig) ruleIsMine(id string) bool {
	name := appliedName(id)
	return m.exclusive && !slices.Contains(m.carried.LifecycleRules, name) || slices.Contains(m.applied.LifecycleRules, name)
}

// ownsPolicy says whether the bucket's policy is the operator's, to delete when the
// spec names none.
func (m managedConfig) ownsPolicy() bool {
	return m.exclusive && !m.carried.Policy || m.applied.Policy
}

// ownsCORS says the same of its CORS configuration.
func (m managedConfig) ownsCORS() bool {
	return m.exclusive && !m.carried.CORS || m.applied.CORS
}

// names is the record of a list of names: none on an exclusive bucket (everything there
// is the operator's, no need to list it), else their compact forms, sorted and unique.
func (m managedConfig) names(names []string) []string {
	if m.exclusive || len(names) == 0 {
		return nil
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, appliedName(n))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// appliedName is how a tag key or rule ID is recorded: itself when short, else a digest,
// so the record stays small however long the names are (see bkv1.AppliedNameMaxLength).
func appliedName(name string) string {
	if len(name) <= bkv1.AppliedNameMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "#" + hex.EncodeToString(sum[:8])
}

// setApplied stores the record, leaving status.applied absent while it is empty.
func setApplied(sb *bkv1.StorageBucket, a bkv1.AppliedConfiguration) {
	if reflect.DeepEqual(a, bkv1.AppliedConfiguration{}) {
		sb.Status.Applied = nil
		return
	}
	sb.Status.Applied = &a
}

// mergeTags is the tag set a bucket should carry: the tags found on it that are not the
// operator's (mine says which are), then the spec's, then the ownership tags, which win.
// A tag the operator set and the spec dropped is gone; the store's own (aws:) tags are
// never part of it.
func mergeTags(have, spec, own map[string]string, mine func(string) bool) map[string]string {
	want := withoutSystemTags(have)
	maps.DeleteFunc(want, func(k, _ string) bool { return mine(k) })
	maps.Copy(want, spec)
	maps.Copy(want, own)
	return want
}

// mergeLifecycle is the lifecycle configuration a bucket should have: the rules found on
// it whose IDs are neither the spec's nor the operator's (mine says which are), kept as
// they are, plus the spec's rules. same reports that the bucket already has it, judged on
// the operator's rules alone (the others are carried unchanged).
func mergeLifecycle(have, want []s3.LifecycleRule, mine func(string) bool) (merged []s3.LifecycleRule, same bool) {
	named := map[string]bool{}
	for _, r := range want {
		named[r.ID] = true
	}
	var ours []s3.LifecycleRule
	for _, r := range have {
		if named[r.ID] || mine(r.ID) {
			ours = append(ours, r)
		} else {
			merged = append(merged, r)
		}
	}
	ours, want = sortedRules(ours), sortedRules(want)
	same = len(ours) == 0 && len(want) == 0 || reflect.DeepEqual(ours, want)
	return sortedRules(append(merged, want...)), same
}
