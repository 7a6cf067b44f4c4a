package guardrail

import (
	"strings"
	"testing"
)

// readBy is a document whose one Allow lets principal (JSON) read the bucket's objects.
func readBy(principal string) string {
	return doc(`"Sid":"read","Effect":"Allow","Principal":` + principal + `,"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`)
}

// nonSpecificPrincipals are principals that are not one specific identity: each is
// public, whatever the store, and the refusal says why. The first two are how Ceph RGW
// names its anonymous user (the empty tenant's "anonymous", and the empty tenant's
// root).
var nonSpecificPrincipals = []struct{ name, principal, why string }{
	{"RGW's anonymous user", `{"AWS":"arn:aws:iam:::user/anonymous"}`, "empty account"},
	{"RGW's empty tenant", `{"AWS":"arn:aws:iam:::root"}`, "empty account"},
	{"an empty account's user", `{"AWS":"arn:aws:iam:::user/alice"}`, "empty account"},
	{"anonymous of an account", `{"AWS":"arn:aws:iam::123456789012:user/anonymous"}`, "anonymous user"},
	{"anonymous in capitals", `{"AWS":"arn:aws:iam::123456789012:user/ANONYMOUS"}`, "anonymous user"},
	{"anonymous under a path", `{"AWS":"arn:aws:iam::123456789012:user/anonymous/x"}`, "anonymous user"},
	{"the anonymous account", `{"AWS":"arn:aws:iam::Anonymous:root"}`, "anonymous account"},
	{"bare anonymous", `{"AWS":"anonymous"}`, "anonymous user"},
	{"a subuser wildcard", `{"AWS":"arn:aws:iam::t:user/u:*"}`, "wildcard"},
	{"a wildcard account", `{"AWS":"arn:aws:iam::*:root"}`, "wildcard"},
	{"a wildcard name", `{"AWS":"arn:aws:iam::123456789012:user/a?"}`, "wildcard"},
	{"a bare name", `{"AWS":"alice"}`, "not a form"},
	{"an ARN in another partition", `{"AWS":"arn:aws-cn:iam::123456789012:root"}`, "not a form"},
	{"an ARN in capitals", `{"AWS":"ARN:AWS:IAM::123456789012:root"}`, "not a form"},
	{"an assumed role", `{"AWS":"arn:aws:sts::123456789012:assumed-role/r/s"}`, "not a form"},
	{"an OIDC provider", `{"AWS":"arn:aws:iam::123456789012:oidc-provider/idp.example.com"}`, "not an account root, user or role"},
	{"a group", `{"AWS":"arn:aws:iam::123456789012:group/g"}`, "not an account root, user or role"},
	{"an empty user name", `{"AWS":"arn:aws:iam::123456789012:user/"}`, "not a plain IAM name"},
	{"an empty path segment", `{"AWS":"arn:aws:iam::123456789012:user//x"}`, "not a plain IAM name"},
	{"a subuser", `{"AWS":"arn:aws:iam::t:user/u:sub"}`, "not a plain IAM name"},
	{"an account with a slash", `{"AWS":"arn:aws:iam::a/b:root"}`, "not a plain account"},
	{"a short account ID", `{"AWS":"12345"}`, "not a form"},
	{"a canonical user", `{"CanonicalUser":"79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be"}`, "type"},
	{"a federated identity", `{"Federated":"arn:aws:iam:::root"}`, "type"},
	{"a federated provider", `{"Federated":"accounts.google.com"}`, "type"},
	{"a service", `{"Service":"logging.s3.amazonaws.com"}`, "type"},
	{"a specific principal beside a public one", `{"AWS":["arn:aws:iam::123456789012:root","arn:aws:iam:::root"]}`, "empty account"},
	{"a specific AWS principal beside a service", `{"AWS":"arn:aws:iam::123456789012:root","Service":"s3.amazonaws.com"}`, "type"},
}

// TestPrincipalsByAllowList: an Allow's principal counts as one specific identity only
// in the shapes the guardrail knows; every other form is public, and says why.
func TestPrincipalsByAllowList(t *testing.T) {
	var cases []policyCase
	for _, p := range []string{
		`{"AWS":"arn:aws:iam::123456789012:root"}`,
		`{"AWS":"arn:aws:iam::123456789012:user/app"}`,
		`{"AWS":"arn:aws:iam::123456789012:user/division/team/app"}`,
		`{"AWS":"arn:aws:iam::123456789012:role/reader"}`,
		`{"AWS":"arn:aws:iam::RGW12345678901234567:user/app"}`,  // an RGW account
		`{"AWS":"arn:aws:iam::acme:user/app"}`,                  // an RGW tenant
		`{"AWS":"arn:aws:iam::other-tenant:user/other-tenant"}`, // a SeaweedFS account
		`{"AWS":"arn:aws:iam::123456789012:user/anonymous-reader"}`,
		`{"AWS":"123456789012"}`,
		`{"AWS":"RGW12345678901234567"}`,
		`{"AWS":["arn:aws:iam::1:root","arn:aws:iam::2:user/b"]}`,
	} {
		cases = append(cases, policyCase{"specific " + p, readBy(p), "", false})
	}
	for _, p := range nonSpecificPrincipals {
		cases = append(cases, policyCase{"public: " + p.name, readBy(p.principal), "", true})
	}
	runPolicyCases(t, cases)

	// Each says which principal, and why.
	for _, p := range nonSpecificPrincipals {
		report, err := InspectPolicy([]byte(readBy(p.principal)), bucket, nil)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		if report.Public != `statement "read"` || !strings.Contains(report.PublicPrincipal, p.why) {
			t.Errorf("%s: public %q because %q; want statement \"read\" because of %s", p.name, report.Public, report.PublicPrincipal, p.why)
		}
	}

	// A Deny's principal may be anyone: it only takes the data plane away.
	for _, p := range nonSpecificPrincipals {
		d := doc(`"Effect":"Deny","Principal":` + p.principal + `,"Action":"s3:DeleteObject","Resource":"arn:aws:s3:::team-a-data/*"`)
		if report, err := InspectPolicy([]byte(d), bucket, nil); err != nil || report.Public != "" {
			t.Errorf("Deny of %s: public %q, %v; want accepted, not public", p.name, report.Public, err)
		}
	}
}

// TestPrincipalsOfTheStoresAccounts: where the store admin lists the store's accounts,
// an Allow names specific principals of those accounts only, and a bare name listed
// there counts as the account it names. The list never makes a public form specific.
func TestPrincipalsOfTheStoresAccounts(t *testing.T) {
	accounts := []string{"123456789012", "acme"}
	cases := []policyCase{
		{"an account's root", readBy(`{"AWS":"arn:aws:iam::123456789012:root"}`), "", false},
		{"an account's user", readBy(`{"AWS":"arn:aws:iam::acme:user/app"}`), "", false},
		{"a bare account ID", readBy(`{"AWS":"123456789012"}`), "", false},
		{"a bare tenant name listed", readBy(`{"AWS":"acme"}`), "", false},
		{"another account's root", readBy(`{"AWS":"arn:aws:iam::999999999999:root"}`), `"arn:aws:iam::999999999999:root" of account "999999999999", which is not among the store's own accounts`, false},
		{"another account's user", readBy(`{"AWS":"arn:aws:iam::other:user/app"}`), `of account "other"`, false},
		{"another bare account ID", readBy(`{"AWS":"999999999999"}`), `of account "999999999999"`, false},
		{"one of several of another account", readBy(`{"AWS":["arn:aws:iam::acme:root","arn:aws:iam::999999999999:root"]}`), `of account "999999999999"`, false},
		{"still public: the empty account", readBy(`{"AWS":"arn:aws:iam:::user/anonymous"}`), "", true},
		{"still public: everyone", readBy(`"*"`), "", true},
		{"a Deny may name any account", doc(`"Effect":"Deny","Principal":{"AWS":"arn:aws:iam::999999999999:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), "", false},
	}
	runPolicyCasesFor(t, accounts, cases)
}
