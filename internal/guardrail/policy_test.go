package guardrail

import (
	"errors"
	"strings"
	"testing"
)

const bucket = "team-a-data"

// policyCase is one document and what InspectPolicy must say of it.
type policyCase struct {
	name       string
	doc        string
	wantErr    string // substring of the refusal; empty: accepted
	wantPublic bool
}

func runPolicyCases(t *testing.T, cases []policyCase) {
	t.Helper()
	runPolicyCasesFor(t, nil, cases)
}

// runPolicyCasesFor runs the cases on a store whose admin lists accounts as its own.
func runPolicyCasesFor(t *testing.T, accounts []string, cases []policyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			report, err := InspectPolicy([]byte(tc.doc), bucket, accounts)
			if tc.wantErr != "" {
				var refused *PolicyError
				if !errors.As(err, &refused) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a refusal containing %q", err, tc.wantErr)
				}
				if report.Canonical != "" {
					t.Errorf("a refused policy has a canonical form to send: %s", report.Canonical)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected refusal: %v", err)
			}
			if got := report.Public != ""; got != tc.wantPublic {
				t.Errorf("public = %v (%q: %s), want %v", got, report.Public, report.PublicPrincipal, tc.wantPublic)
			}
			if (report.Public == "") != (report.PublicPrincipal == "") {
				t.Errorf("public statement %q without its principal %q, or the other way round", report.Public, report.PublicPrincipal)
			}
			if report.Canonical == "" {
				t.Error("an accepted policy has no canonical form")
			}
		})
	}
}

// doc is a policy of the given statements (each the inside of a JSON object).
func doc(statements ...string) string {
	return `{"Version":"2012-10-17","Statement":[{` + strings.Join(statements, `},{`) + `}]}`
}

// readGrant is the inside of a statement that lets one account read the bucket's objects.
const readGrant = `"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`

// allowOf is a document whose one statement allows an account the given Action (JSON).
func allowOf(action string) string {
	return doc(`"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:user/app"},"Action":` + action + `,"Resource":["arn:aws:s3:::team-a-data","arn:aws:s3:::team-a-data/*"]`)
}

// TestInspectPolicy: the bucket rules (resources, public principals, size) on documents
// the grammar accepts.
func TestInspectPolicy(t *testing.T) {
	runPolicyCases(t, []policyCase{
		{"private read for one account", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`, "", false},
		{"statement as a single object", `{"Statement":{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::1:user/x"]},"Action":"s3:ListBucket","Resource":["arn:aws:s3:::team-a-data"]}}`, "", false},
		{"enforce TLS deny for everyone is not public", `{"Statement":[{"Sid":"TLS","Effect":"Deny","Principal":"*","Action":["s3:GetObject","s3:PutObject","s3:ListBucket"],"Resource":["arn:aws:s3:::team-a-data","arn:aws:s3:::team-a-data/*"],"Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`, "", false},
		{"anonymous principal", `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`, "", true},
		{"AWS wildcard principal", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`, "", true},
		{"AWS wildcard in a list", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::1:root","*"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`, "", true},
		{"wildcard account pattern", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::*:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`, "", true},
		{"wildcard under another principal type", doc(`"Effect":"Allow","Principal":{"Service":"*.amazonaws.com"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), "", true},
		{"NotPrincipal grants everyone else", `{"Statement":[{"Effect":"Allow","NotPrincipal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`, "", true},
		{"NotPrincipal in a Deny", doc(`"Effect":"Deny","NotPrincipal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`), "a Deny with NotPrincipal", false},
		{"missing principal", `{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`, "", true},
		{"public in a later statement", doc(readGrant, `"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::team-a-data"`), "", true},
		{"resource of another bucket", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::audit-logs/*"}]}`, `"arn:aws:s3:::audit-logs/*", which is not bucket`, false},
		{"one of several resources elsewhere", `{"Statement":[{"Sid":"x","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":["arn:aws:s3:::team-a-data/*","arn:aws:s3:::tfstate/*"]}]}`, `statement "x" has Resource "arn:aws:s3:::tfstate/*"`, false},
		{"wildcard in the bucket part", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-*/*"}]}`, "which is not bucket", false},
		{"bucket name as a prefix of another", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data-other"}]}`, "which is not bucket", false},
		{"every resource", `{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*"}]}`, "which is not bucket", false},
		{"not an S3 ARN", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:iam::1:user/x"}]}`, "which is not bucket", false},
		{"NotResource", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","NotResource":"arn:aws:s3:::team-a-data/*"}]}`, "NotResource", false},
		{"NotResource in a Deny", doc(`"Effect":"Deny","Principal":"*","Action":"s3:GetObject","NotResource":"arn:aws:s3:::team-a-data/*"`), "NotResource", false},
		{"no resource", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject"}]}`, "must have a Resource", false},
		{"no statement", `{"Version":"2012-10-17"}`, "must have a Statement", false},
		{"empty statement list", `{"Statement":[]}`, "must have a Statement", false},
		{"statement not an object", `{"Statement":["x"]}`, "must be an object", false},
		{"statement a string", `{"Statement":"x"}`, "must have a Statement", false},
		{"not an object", `["x"]`, "must be a JSON object", false},
		{"too large", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*","Sid":"` + strings.Repeat("a", MaxPolicySize) + `"}]}`, "more than S3's limit", false},
		{"1 MiB", `{"Statement":[{` + readGrant + `,"Condition":{"StringLike":{"aws:Referer":["` + strings.Repeat(`x","`, 1<<18) + `"]}}}]}`, "more than S3's limit", false},
		{"over the limit once written out", doc(`"Sid":"` + strings.Repeat("\u2028", 6000) + `",` + readGrant), "once written out", false},
		{"a long Sid is cut in the refusal", doc(`"Sid":"` + strings.Repeat("s", 10_000) + `",` + `"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::elsewhere/*"`), `statement "` + strings.Repeat("s", maxQuoted) + `"... has Resource`, false},
	})
}

// TestRefusalsAreShort: however long the tenant's strings, a refusal stays well under
// the 32 KiB a condition message may hold.
func TestRefusalsAreShort(t *testing.T) {
	long := strings.Repeat("\u2028", 6000) // 3 bytes each, 6 quoted
	for _, d := range []string{
		doc(`"Sid":"` + long + `","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::x/*"`),
		`{"` + long + `":1}`,
		doc(`"Effect":"Allow","Principal":{"AWS":"a"},"Action":"` + long + `","Resource":"arn:aws:s3:::team-a-data/*"`),
	} {
		_, err := InspectPolicy([]byte(d), bucket, nil)
		if err == nil {
			t.Errorf("accepted: %.200s", d)
		} else if len(err.Error()) > 2048 {
			t.Errorf("refusal of %d bytes: %.200v", len(err.Error()), err)
		}
	}
}
