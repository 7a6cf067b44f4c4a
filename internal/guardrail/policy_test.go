package guardrail

import (
	"errors"
	"strings"
	"testing"
)

func TestInspectPolicy(t *testing.T) {
	const bucket = "team-a-data"
	tests := []struct {
		name       string
		doc        string
		wantErr    string // substring of the refusal; empty: accepted
		wantPublic bool
	}{
		{"private read for one account", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`, "", false},
		{"statement as a single object", `{"Statement":{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::1:user/x"]},"Action":"s3:ListBucket","Resource":["arn:aws:s3:::team-a-data"]}}`, "", false},
		{"enforce TLS deny for everyone is not public", `{"Statement":[{"Sid":"TLS","Effect":"Deny","Principal":"*","Action":"s3:*","Resource":["arn:aws:s3:::team-a-data","arn:aws:s3:::team-a-data/*"],"Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`, "", false},
		{"anonymous principal", `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`, "", true},
		{"AWS wildcard principal", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`, "", true},
		{"AWS wildcard in a list", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam::1:root","*"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`, "", true},
		{"wildcard account pattern", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::*:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`, "", true},
		{"NotPrincipal grants everyone else", `{"Statement":[{"Effect":"Allow","NotPrincipal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`, "", true},
		{"missing principal", `{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`, "", true},
		{"resource of another bucket", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::audit-logs/*"}]}`, `"arn:aws:s3:::audit-logs/*", which is not bucket`, false},
		{"one of several resources elsewhere", `{"Statement":[{"Sid":"x","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":["arn:aws:s3:::team-a-data/*","arn:aws:s3:::tfstate/*"]}]}`, `statement "x" has Resource "arn:aws:s3:::tfstate/*"`, false},
		{"wildcard in the bucket part", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-*/*"}]}`, "which is not bucket", false},
		{"bucket name as a prefix of another", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data-other"}]}`, "which is not bucket", false},
		{"every resource", `{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*"}]}`, "which is not bucket", false},
		{"not an S3 ARN", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:iam::1:user/x"}]}`, "which is not bucket", false},
		{"NotResource", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","NotResource":"arn:aws:s3:::team-a-data/*"}]}`, "NotResource", false},
		{"no resource", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject"}]}`, "must have a Resource", false},
		{"no statement", `{"Version":"2012-10-17"}`, "must have a Statement", false},
		{"empty statement list", `{"Statement":[]}`, "must have a Statement", false},
		{"statement not an object", `{"Statement":["x"]}`, "must be an object", false},
		{"not an object", `["x"]`, "must be a JSON object", false},
		{"too large", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*","Sid":"` + strings.Repeat("a", MaxPolicySize) + `"}]}`, "more than S3's limit", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			report, err := InspectPolicy([]byte(tc.doc), bucket)
			if tc.wantErr != "" {
				var refused *PolicyError
				if !errors.As(err, &refused) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a refusal containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected refusal: %v", err)
			}
			if got := report.Public != ""; got != tc.wantPublic {
				t.Errorf("public = %v (%q), want %v", got, report.Public, tc.wantPublic)
			}
		})
	}
}

// FuzzInspectPolicy: any document is either refused with a PolicyError or accepted, and
// an accepted one names only this bucket in every Resource.
func FuzzInspectPolicy(f *testing.F) {
	f.Add([]byte(`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`))
	f.Add([]byte(`{"Statement":{"Effect":"Deny","Resource":["arn:aws:s3:::b","arn:aws:s3:::c"]}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		_, err := InspectPolicy(doc, "b")
		var refused *PolicyError
		if err != nil && !errors.As(err, &refused) {
			t.Fatalf("error of another kind: %v", err)
		}
	})
}
