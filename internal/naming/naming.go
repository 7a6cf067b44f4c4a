// Package naming derives bucket names from StorageBuckets and checks names against the
// S3 bucket-naming rules that the CRD also enforces at admission.
package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

const (
	maxBucketName = 63
	hashLen       = 8
)

var (
	invalidRun     = regexp.MustCompile(`[^a-z0-9]+`)
	validCharset   = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`)
	ipv4Shaped     = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$`)
	reservedPrefix = []string{"xn--", "sthree-", "amzn-s3-demo-"}
	reservedSuffix = []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"}
)

// BucketName returns the bucket name for a StorageBucket that names none itself.
//
// The name is readable (prefix, namespace and name joined by '-') and always ends in a
// hash of the exact (prefix, namespace, name) triple. The hash is not only there for
// truncation: joining with '-' is ambiguous ("a-b"+"c" and "a"+"b-c" read the same),
// and two claims must never derive the same bucket. Nothing time- or random-based goes
// in, so a repeated create collides with its own earlier work.
func BucketName(prefix, namespace, name string) string {
	sum := sha256.Sum256([]byte(prefix + "\x00" + namespace + "\x00" + name))
	hash := hex.EncodeToString(sum[:])[:hashLen]

	base := strings.Trim(invalidRun.ReplaceAllString(strings.ToLower(strings.Join([]string{prefix, namespace, name}, "-")), "-"), "-")
	for _, p := range reservedPrefix {
		if strings.HasPrefix(base, strings.TrimSuffix(p, "-")) {
			base = "bk-" + base
			break
		}
	}
	if limit := maxBucketName - 1 - hashLen; len(base) > limit {
		base = strings.TrimRight(base[:limit], "-")
	}
	if base == "" {
		base = "bucket"
	}
	return base + "-" + hash
}

// Validate reports why name is not a valid S3 bucket name, or nil. It mirrors the
// CRD's admission rules so the derived names are held to the same standard.
func Validate(name string) error {
	switch {
	case len(name) < 3 || len(name) > maxBucketName:
		return fmt.Errorf("bucket name %q must be 3 to 63 characters long", name)
	case !validCharset.MatchString(name):
		return fmt.Errorf("bucket name %q may contain only lowercase letters, digits, '.' and '-', and must start and end with a letter or digit", name)
	case strings.Contains(name, ".."):
		return fmt.Errorf("bucket name %q must not contain two adjacent periods", name)
	case ipv4Shaped.MatchString(name):
		return fmt.Errorf("bucket name %q must not be formatted as an IPv4 address", name)
	}
	for _, p := range reservedPrefix {
		if strings.HasPrefix(name, p) {
			return fmt.Errorf("bucket name %q must not start with %q", name, p)
		}
	}
	for _, s := range reservedSuffix {
		if strings.HasSuffix(name, s) {
			return fmt.Errorf("bucket name %q must not end with %q", name, s)
		}
	}
	return nil
}

// maxLabelValue is Kubernetes' limit on a label value.
const maxLabelValue = 63

// LabelValue returns an object's name as a label value: the name itself when it fits,
// else its first characters and a hash of the whole name. Object names may be up to 253
// characters and a label value only 63; the operator labels Secrets with the names of
// the objects they belong to, and a longer label would make every write fail. The
// result is deterministic, so selectors built from it find what writes labelled.
func LabelValue(name string) string {
	if len(name) <= maxLabelValue {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	hash := hex.EncodeToString(sum[:])[:16]
	// A label value must end in an alphanumeric character; the hash does.
	return strings.TrimRight(name[:maxLabelValue-1-len(hash)], "-_.") + "-" + hash
}

// derivedShape is how every derived name ends: a hyphen and hashLen hex digits.
var derivedShape = regexp.MustCompile(`-[0-9a-f]{8}$`)

// LaneStem returns what an explicit bucket name of namespace must start with to be in
// that namespace's lane: the store's prefix, the namespace and a hyphen, as derived
// names start (BucketName). The namespace is kept as written, runs of hyphens included,
// so two namespaces never share a stem; a prefix already ending in '-' or '.' is not
// given a second separator.
func LaneStem(prefix, namespace string) string {
	if prefix == "" || strings.HasSuffix(prefix, "-") || strings.HasSuffix(prefix, ".") {
		return prefix + namespace + "-"
	}
	return prefix + "-" + namespace + "-"
}

// HasDerivedShape says whether name ends the way every derived name does (-<8 hex>).
// An explicit name of that shape could be the name some other claim derives, now or
// once it is created, and no one can tell whose from the name alone.
func HasDerivedShape(name string) bool { return derivedShape.MatchString(name) }

// LongerLanes returns the namespaces whose lanes also hold name although it starts with
// namespace's stem: a namespace's name may extend another's ("team" and "team-b"), and
// "p-team-b-logs" starts with both stems. The longest stem that matches decides whose
// lane a name is in, so a caller refuses name for namespace when any of these exists.
// The candidates are cut at each hyphen after the stem; those that are not valid
// namespace names simply never exist.
func LongerLanes(prefix, namespace, name string) []string {
	stem := LaneStem(prefix, namespace)
	rest, ok := strings.CutPrefix(name, stem)
	if !ok {
		return nil
	}
	var out []string
	for i := 1; i < len(rest); i++ {
		if rest[i] == '-' && len(namespace)+1+i <= maxLabelValue {
			out = append(out, namespace+"-"+rest[:i])
		}
	}
	return out
}
