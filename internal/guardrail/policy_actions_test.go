package guardrail

import (
	"strings"
	"testing"
)

// TestAllowedActions: a statement names only data-plane actions, never one that
// configures the bucket (a principal with s3:PutBucketTagging could rewrite the ownership
// tags), and never a wildcard or NotAction. That holds for a Deny as much as an Allow: a
// Deny of the configuration would deny the operator where the store applies the policy
// to it (a shield against the withdrawal of a public policy, a lock-out).
func TestAllowedActions(t *testing.T) {
	var cases []policyCase
	forbidden := []string{
		"s3:PutBucketTagging", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy", "s3:PutLifecycleConfiguration",
		"s3:PutBucketVersioning", "s3:DeleteBucket", "s3:PutBucketAcl", "s3:PutBucketCORS",
		"s3:PutBucketPublicAccessBlock", "s3:PutObjectAcl", "s3:PutObjectRetention", "s3:PutObjectLegalHold",
		"s3:BypassGovernanceRetention", "s3:PutBucketObjectLockConfiguration", "s3:RestoreObject", "s3:GetBucketPolicy", "s3:CreateBucket",
		"iam:CreateAccessKey", "s3:ListAllMyBuckets", " s3:GetObject", "s3:GetBucketPublicAccessBlock",
		"s3:GetBucketTagging", "s3:DeleteBucketPublicAccessBlock",
	}
	for _, a := range forbidden {
		cases = append(cases,
			policyCase{"refused " + a, allowOf(`"` + a + `"`), `allows the action "` + a + `"`, false},
			policyCase{"refused in a Deny " + a, denyOf(`"*"`, `"`+a+`"`), `denies the action "` + a + `"`, false})
	}
	for _, a := range []string{"s3:*", "*", "s3:Put*", "s3:Get*", "s3:GetObjec?", "S3:*"} {
		cases = append(cases,
			policyCase{"wildcard " + a, allowOf(`"` + a + `"`), `allows the wildcard action "` + a + `"`, false},
			policyCase{"wildcard in a Deny " + a, denyOf(`"*"`, `"`+a+`"`), `denies the wildcard action "` + a + `"`, false})
	}
	for _, a := range AllowedActions {
		cases = append(cases,
			policyCase{"allowed " + a, allowOf(`"` + a + `"`), "", false},
			policyCase{"denied " + a, denyOf(`"*"`, `"`+a+`"`), "", false})
	}
	cases = append(cases,
		policyCase{"case-insensitive like AWS", allowOf(`["S3:getobject","s3:LISTBUCKET"]`), "", false},
		policyCase{"a forbidden action among allowed ones", allowOf(`["s3:GetObject","s3:PutBucketTagging","s3:ListBucket"]`), `"s3:PutBucketTagging"`, false},
		policyCase{"NotAction in an Allow", doc(`"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:user/app"},"NotAction":"s3:DeleteBucket","Resource":"arn:aws:s3:::team-a-data/*"`), "an Allow with NotAction", false},
		policyCase{"NotAction in a Deny", doc(`"Effect":"Deny","Principal":"*","NotAction":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), "a Deny with NotAction", false},
		// The shield of a public policy against its withdrawal, and the lock-out.
		policyCase{"Deny shielding a public policy", doc(`"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`,
			`"Sid":"shield","Effect":"Deny","Principal":"*","Action":["s3:GetBucketPublicAccessBlock","s3:PutBucketPublicAccessBlock","s3:PutBucketPolicy","s3:DeleteBucketPolicy"],"Resource":"arn:aws:s3:::team-a-data"`),
			`statement "shield" denies the action "s3:GetBucketPublicAccessBlock"`, false},
		policyCase{"Deny locking everyone out", denyOf(`"*"`, `"s3:*"`), `denies the wildcard action "s3:*"`, false},
		policyCase{"Deny locking all but the app out", doc(`"Effect":"Deny","NotPrincipal":{"AWS":"arn:aws:iam::1:user/app"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`),
			"a Deny with NotPrincipal", false},
		policyCase{"TLS only, by the data actions", denyOf(`"*"`, `["s3:GetObject","s3:PutObject","s3:DeleteObject","s3:ListBucket","s3:ListBucketVersions"]`), "", false},
		policyCase{"forbidden Allow after an accepted Deny", doc(`"Effect":"Deny","Principal":"*","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::team-a-data/*"`, `"Sid":"tags","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:user/app"},"Action":"s3:PutBucketTagging","Resource":"arn:aws:s3:::team-a-data"`), `statement "tags" allows the action`, false},
	)
	runPolicyCases(t, cases)
}

// denyOf is a document whose one statement denies principal (JSON) the given Action
// (JSON) on the bucket and its objects.
func denyOf(principal, action string) string {
	return doc(`"Effect":"Deny","Principal":` + principal + `,"Action":` + action + `,"Resource":["arn:aws:s3:::team-a-data","arn:aws:s3:::team-a-data/*"]`)
}

// TestAllowedActionsAreData: the list itself holds no configuration action, whatever
// someone adds to it later.
func TestAllowedActionsAreData(t *testing.T) {
	for _, a := range AllowedActions {
		name := strings.TrimPrefix(a, "s3:")
		switch {
		case !strings.HasPrefix(a, "s3:"), strings.ContainsAny(a, "*?"):
			t.Errorf("%s is not an S3 action name", a)
		case strings.Contains(name, "Bucket") && !strings.HasPrefix(name, "ListBucket") && name != "GetBucketLocation":
			t.Errorf("%s is a bucket action", a)
		case strings.Contains(name, "Acl"), strings.Contains(name, "Policy"), strings.Contains(name, "Retention"), strings.Contains(name, "LegalHold"):
			t.Errorf("%s touches access or object lock", a)
		}
	}
}
