// Package guardrail checks what a tenant asks of a bucket against what the platform
// team allows on the store. Its functions are pure: they read documents and names, never
// the store, so every refusal is decided before anything is sent.
package guardrail

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxPolicySize is S3's limit on a bucket policy document. Admission cannot bound
// spec.policy (the API server's schema and CEL see no byte size of an object whose
// fields are unknown to it), so InspectPolicy refuses a larger document before decoding
// a byte of it.
const MaxPolicySize = 20 * 1024

const s3ARNPrefix = "arn:aws:s3:::"

// PolicyReport is what a bucket policy grants, as far as the guardrails care, and the
// document to send.
type PolicyReport struct {
	// Public names the first Allow whose principal is not one specific identity
	// (policy_principals.go): "*", none, NotPrincipal (everyone but a few), or a
	// principal of a form the guardrail does not know to name one identity. Empty
	// when there is none.
	Public string
	// PublicPrincipal says which principal made it public, and why, for the refusal.
	PublicPrincipal string
	// Canonical is the policy as it was checked, in the canonical form (see
	// policy_canonical.go). It is what the operator sends the store: the tenant's own
	// bytes may say more than the parser saw to a store that reads JSON another way.
	Canonical string
}

// PolicyError says which rule a policy breaks; its message is safe to show a tenant.
type PolicyError struct{ Message string }

func (e *PolicyError) Error() string { return e.Message }

func refuse(format string, args ...any) *PolicyError {
	return &PolicyError{Message: fmt.Sprintf(format, args...)}
}

// InspectPolicy checks a bucket policy for the bucket named bucket and returns it in
// the canonical form. The document must be at most MaxPolicySize bytes of UTF-8 and
// follow the policy grammar strictly (policy_parse.go: known keys in their exact case,
// none twice, Effect Allow or Deny). Every statement's Resource must name only this
// bucket or objects in it: a statement that could reach another bucket (a wildcard in
// the bucket part, NotResource, a non-S3 ARN) is refused, as stores differ in whether
// they reject such a policy and some would apply it. Every statement, Allow or Deny,
// may name only AllowedActions (policy_actions.go), and a Deny may not use
// NotPrincipal. It also reports whether the policy is public (policy_principals.go),
// which the caller weighs against the store's guardrails. accounts are the store's own
// accounts, as its admin lists them (guardrails.policyPrincipalAccounts): when there
// are any, an Allow may name specific principals of those accounts only.
func InspectPolicy(doc []byte, bucket string, accounts []string) (PolicyReport, error) {
	var report PolicyReport
	if len(doc) > MaxPolicySize {
		return report, refuse("policy is %d bytes, more than S3's limit of %d", len(doc), MaxPolicySize)
	}
	if !utf8.Valid(doc) {
		return report, refuse("policy is not valid UTF-8")
	}
	policy, err := parsePolicy(doc)
	if err != nil {
		return report, err
	}
	for i := range policy.statements {
		st := &policy.statements[i]
		name := statementName(st, i)
		if st.notResource != nil {
			return report, refuse("policy %s uses NotResource, which can reach other buckets; name this bucket's resources in Resource", name)
		}
		if st.resource == nil {
			return report, refuse("policy %s must have a Resource naming arn:aws:s3:::%s or arn:aws:s3:::%s/...", name, bucket, bucket)
		}
		for _, res := range st.resource.list {
			if !resourceOfBucket(res, bucket) {
				return report, refuse("policy %s has Resource %s, which is not bucket %q or its objects", name, quote(res), bucket)
			}
		}
		if err := checkActions(name, st); err != nil {
			return report, err
		}
		if st.effect != "Allow" {
			// A Deny for everyone (enforce TLS, say) takes access away, never grants
			// it; but NotPrincipal would deny everyone but a few, the operator included.
			if st.notPrincipal != nil {
				return report, refuse("policy %s is a Deny with NotPrincipal, which denies everyone but the principals it names, the operator included; name the principals it denies in Principal (\"*\" for everyone)", name)
			}
			continue
		}
		why, err := publicPrincipal(name, st, accounts)
		if err != nil {
			return report, err
		}
		if report.Public == "" && why != "" {
			report.Public, report.PublicPrincipal = name, why
		}
	}
	canonical := policy.canonical()
	if len(canonical) > MaxPolicySize {
		// Only a document full of escapes that decode longer than they were gets here.
		return report, refuse("policy is %d bytes once written out, more than S3's limit of %d", len(canonical), MaxPolicySize)
	}
	report.Canonical = string(canonical)
	return report, nil
}

// resourceOfBucket accepts arn:aws:s3:::bucket and arn:aws:s3:::bucket/<key pattern>.
// Wildcards are fine in the key part, never in the bucket part.
func resourceOfBucket(res, bucket string) bool {
	rest, ok := strings.CutPrefix(res, s3ARNPrefix)
	if !ok {
		return false
	}
	name, _, _ := strings.Cut(rest, "/")
	return name == bucket
}

func statementName(st *statement, i int) string {
	if st.sid != nil && *st.sid != "" {
		return "statement " + quote(*st.sid)
	}
	return fmt.Sprintf("Statement[%d]", i)
}

// maxQuoted bounds a tenant's string quoted in a refusal: a condition message must stay
// short however long the key, Sid or action in the document.
const maxQuoted = 64

// quote is s quoted for a refusal, cut to maxQuoted bytes.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}
