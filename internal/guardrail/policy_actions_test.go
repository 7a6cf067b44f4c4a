package guardrail

import (
	"strings"
	"testing"
)

// TestAllowedActions: an Allow grants only data-plane actions, never one that configures
// the bucket (a principal with s3:PutBucketTagging could rewrite the ownership tags), and
// never a wildcard or NotAction. A Deny may name anything.
func TestAllowedActions(t *testing.T) {
	var cases []policyCase
	for _, a := range []string{
		"s3:PutBucketTagging", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy", "s3:PutLifecycleConfiguration",
		"s3:PutBucketVersioning", "s3:DeleteBucket", "s3:PutBucketAcl", "s3:PutBucketCORS",
		"s3:PutBucketPublicAccessBlock", "s3:PutObjectAcl", "s3:PutObjectRetention", "s3:PutObjectLegalHold",
		"s3:BypassGovernanceRetention", "s3:PutBucketObjectLockConfiguration", "s3:RestoreObject", "s3:GetBucketPolicy", "s3:CreateBucket",
		"iam:CreateAccessKey", "s3:ListAllMyBuckets", " s3:GetObject",
	} {
		cases = append(cases, policyCase{"refused " + a, allowOf(`"` + a + `"`), `allows the action "` + a + `"`, false})
	}
	for _, a := range []string{"s3:*", "*", "s3:Put*", "s3:Get*", "s3:GetObjec?", "S3:*"} {
		cases = append(cases, policyCase{"wildcard " + a, allowOf(`"` + a + `"`), `allows the wildcard action "` + a + `"`, false})
	}
	for _, a := range AllowedActions {
		cases = append(cases, policyCase{"allowed " + a, allowOf(`"` + a + `"`), "", false})
	}
	cases = append(cases,
		policyCase{"case-insensitive like AWS", allowOf(`["S3:getobject","s3:LISTBUCKET"]`), "", false},
		policyCase{"a forbidden action among allowed ones", allowOf(`["s3:GetObject","s3:PutBucketTagging","s3:ListBucket"]`), `"s3:PutBucketTagging"`, false},
		policyCase{"NotAction in an Allow", doc(`"Effect":"Allow","Principal":{"AWS":"a"},"NotAction":"s3:DeleteBucket","Resource":"arn:aws:s3:::team-a-data/*"`), "Allow with NotAction", false},
		policyCase{"Deny with s3:*", doc(`"Effect":"Deny","Principal":{"AWS":"a"},"Action":"s3:*","Resource":["arn:aws:s3:::team-a-data","arn:aws:s3:::team-a-data/*"]`), "", false},
		policyCase{"Deny with configuration actions", doc(`"Effect":"Deny","Principal":"*","Action":["s3:PutBucketPolicy","s3:DeleteBucket"],"Resource":"arn:aws:s3:::team-a-data"`), "", false},
		policyCase{"Deny with NotAction", doc(`"Effect":"Deny","Principal":"*","NotAction":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), "", false},
		policyCase{"forbidden Allow after an accepted Deny", doc(`"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::team-a-data/*"`, `"Sid":"tags","Effect":"Allow","Principal":{"AWS":"a"},"Action":"s3:PutBucketTagging","Resource":"arn:aws:s3:::team-a-data"`), `statement "tags" allows the action`, false},
	)
	runPolicyCases(t, cases)
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
