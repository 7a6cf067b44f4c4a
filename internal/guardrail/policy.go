// Package guardrail checks what a tenant asks of a bucket against what the platform
// team allows on the store. Its functions are pure: they read documents and names, never
// the store, so every refusal is decided before anything is sent.
package guardrail

import (
	"encoding/json"
	"fmt"
	"strings"
)

// MaxPolicySize is S3's limit on a bucket policy document.
const MaxPolicySize = 20 * 1024

const s3ARNPrefix = "arn:aws:s3:::"

// PolicyReport is what a bucket policy grants, as far as the guardrails care.
type PolicyReport struct {
	// Public names the first statement that grants an anonymous or wildcard
	// principal (or grants through NotPrincipal, which means everyone but a few);
	// empty when there is none.
	Public string
}

// PolicyError says which rule a policy breaks; its message is safe to show a tenant.
type PolicyError struct{ Message string }

func (e *PolicyError) Error() string { return e.Message }

func refuse(format string, args ...any) *PolicyError {
	return &PolicyError{Message: fmt.Sprintf(format, args...)}
}

// InspectPolicy checks a bucket policy for the bucket named bucket: at most
// MaxPolicySize bytes, a JSON object with a Statement, and every statement's Resource
// naming only this bucket or objects in it. A statement that could reach another bucket
// (a wildcard in the bucket part, NotResource, a non-S3 ARN) is refused: stores differ in
// whether they reject such a policy, and some would apply it. It also reports whether
// the policy is public, which the caller weighs against the store's guardrails.
func InspectPolicy(doc []byte, bucket string) (PolicyReport, error) {
	var report PolicyReport
	if len(doc) > MaxPolicySize {
		return report, refuse("policy is %d bytes, more than S3's limit of %d", len(doc), MaxPolicySize)
	}
	var policy map[string]any
	if err := json.Unmarshal(doc, &policy); err != nil {
		return report, refuse("policy must be a JSON object: %v", err)
	}
	statements, err := listOf(policy["Statement"])
	if err != nil || len(statements) == 0 {
		return report, refuse("policy must have a Statement: an object or a non-empty list of objects")
	}
	for i, raw := range statements {
		st, ok := raw.(map[string]any)
		if !ok {
			return report, refuse("policy Statement[%d] must be an object", i)
		}
		name := statementName(st, i)
		if _, ok := st["NotResource"]; ok {
			return report, refuse("policy %s uses NotResource, which can reach other buckets; name this bucket's resources in Resource", name)
		}
		resources, err := stringsOf(st["Resource"])
		if err != nil || len(resources) == 0 {
			return report, refuse("policy %s must have a Resource naming arn:aws:s3:::%s or arn:aws:s3:::%s/...", name, bucket, bucket)
		}
		for _, res := range resources {
			if !resourceOfBucket(res, bucket) {
				return report, refuse("policy %s has Resource %q, which is not bucket %q or its objects", name, res, bucket)
			}
		}
		if effect, _ := st["Effect"].(string); effect != "Allow" || report.Public != "" {
			continue // a Deny for everyone (enforce TLS, say) takes access away, never grants it
		}
		if _, ok := st["NotPrincipal"]; ok {
			report.Public = name
			continue
		}
		if wildcardPrincipal(st["Principal"]) {
			report.Public = name
		}
	}
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

// wildcardPrincipal reports a principal that matches anyone: "*", or "*" (or a pattern
// with a wildcard) under any principal type. A missing principal is treated the same:
// a store may read it as everyone.
func wildcardPrincipal(p any) bool {
	switch v := p.(type) {
	case nil:
		return true
	case string:
		return strings.Contains(v, "*")
	case map[string]any:
		for _, ids := range v {
			list, err := stringsOf(ids)
			if err != nil {
				return true // unreadable: assume the worst
			}
			for _, id := range list {
				if strings.Contains(id, "*") {
					return true
				}
			}
		}
		return false
	default:
		return true
	}
}

func statementName(st map[string]any, i int) string {
	if sid, ok := st["Sid"].(string); ok && sid != "" {
		return fmt.Sprintf("statement %q", sid)
	}
	return fmt.Sprintf("Statement[%d]", i)
}

// listOf accepts IAM's "one element or a list" form.
func listOf(v any) ([]any, error) {
	switch t := v.(type) {
	case []any:
		return t, nil
	case map[string]any:
		return []any{t}, nil
	default:
		return nil, fmt.Errorf("not an object or a list")
	}
}

func stringsOf(v any) ([]string, error) {
	switch t := v.(type) {
	case string:
		return []string{t}, nil
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("not a string")
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("not a string or a list of strings")
	}
}
