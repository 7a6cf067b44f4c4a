package guardrail

import (
	"errors"
	"strings"
	"testing"

	awspolicy "github.com/hashicorp/awspolicyequivalence"
)

// TestCanonicalPolicy: the canonical form has a fixed key order and no whitespace,
// keeps every value as written, and says the same as the tenant's document by the
// comparison the operator uses for drift (awspolicyequivalence).
func TestCanonicalPolicy(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"keys in the grammar's order, no whitespace",
			`{ "Statement": [ { "Resource": "arn:aws:s3:::team-a-data/*", "Action": ["s3:GetObject"], "Principal": { "AWS": "arn:aws:iam::1:root" }, "Effect": "Allow", "Sid": "read" } ], "Id": "p1", "Version": "2012-10-17" }`,
			`{"Version":"2012-10-17","Id":"p1","Statement":[{"Sid":"read","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":["s3:GetObject"],"Resource":"arn:aws:s3:::team-a-data/*"}]}`},
		{"a single statement becomes a list; no Version stays none",
			`{"Statement":{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}}`,
			`{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`},
		{"principal types and condition operators and keys sorted; values as written",
			`{"Statement":[{"Condition":{"StringLike":{"s3:prefix":["b/*","a/*"],"aws:Referer":"https://x/?a=1&b=<2>"},"Bool":{"aws:SecureTransport":false},"NumericLessThan":{"s3:max-keys":1.50e1}},"Resource":["arn:aws:s3:::team-a-data"],"Action":"s3:ListBucket","Principal":{"Service":"s","AWS":["b","a"]},"Effect":"Allow"}]}`,
			`{"Statement":[{"Effect":"Allow","Principal":{"AWS":["b","a"],"Service":"s"},"Action":"s3:ListBucket","Resource":["arn:aws:s3:::team-a-data"],"Condition":{"Bool":{"aws:SecureTransport":false},"NumericLessThan":{"s3:max-keys":1.50e1},"StringLike":{"aws:Referer":"https://x/?a=1&b=<2>","s3:prefix":["b/*","a/*"]}}}]}`},
		{"NotPrincipal and an empty Sid and Condition are kept",
			`{"Statement":[{"Sid":"","NotPrincipal":{"AWS":"a"},"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*","Condition":{}}]}`,
			`{"Statement":[{"Sid":"","Effect":"Allow","NotPrincipal":{"AWS":"a"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*","Condition":{}}]}`},
		{"escapes are written once decoded",
			`{"Statement":[{"Sid":"caf\u00e9 \"x\"","Effect":"Allow","Principal":{"AWS":"a"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/\u002a"}]}`,
			`{"Statement":[{"Sid":"café \"x\"","Effect":"Allow","Principal":{"AWS":"a"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			report, err := InspectPolicy([]byte(tc.in), bucket, nil)
			if err != nil {
				t.Fatal(err)
			}
			if report.Canonical != tc.want {
				t.Errorf("canonical:\n got %s\nwant %s", report.Canonical, tc.want)
			}
			assertCanonical(t, tc.in, report)
		})
	}
}

// TestCanonicalOfAccepted: every document the other tables accept round-trips and is
// equivalent to its canonical form.
func TestCanonicalOfAccepted(t *testing.T) {
	accepted := []string{
		doc(readGrant),
		allowOf(`["s3:GetObject","s3:PutObject","s3:ListBucket"]`),
		`{"Statement":[{"Sid":"TLS","Effect":"Deny","Principal":"*","Action":["s3:GetObject","s3:PutObject"],"Resource":["arn:aws:s3:::team-a-data","arn:aws:s3:::team-a-data/*"],"Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`,
		`{"Version":"2008-10-17","Statement":{"Effect":"Allow","Principal":{"AWS":"123456789012"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"}}`,
		doc(`"Effect":"Allow","NotPrincipal":{"AWS":"a"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-a-data/*"`,
			`"Effect":"Deny","Principal":{"AWS":["a","b"]},"Action":["s3:DeleteObject","s3:DeleteObjectVersion"],"Resource":"arn:aws:s3:::team-a-data/keep/*","Condition":{"StringNotEquals":{"aws:username":["x","y"]}}`),
	}
	for _, d := range accepted {
		report, err := InspectPolicy([]byte(d), bucket, nil)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		assertCanonical(t, d, report)
	}
}

// assertCanonical: the canonical form of in parses again to itself, with the same
// verdict, and says what in says.
func assertCanonical(t *testing.T, in string, report PolicyReport) {
	t.Helper()
	again, err := InspectPolicy([]byte(report.Canonical), bucket, nil)
	if err != nil {
		t.Fatalf("the canonical form is refused: %v\n%s", err, report.Canonical)
	}
	if again != report {
		t.Errorf("re-parsing the canonical form gives %+v, want %+v", again, report)
	}
	same, err := awspolicy.PoliciesAreEquivalent(in, report.Canonical)
	if err != nil || !same {
		t.Errorf("canonical form not equivalent to the document (%v):\n in %s\nout %s", err, in, report.Canonical)
	}
}

// FuzzInspectPolicy: any document is either refused with a PolicyError or accepted; an
// accepted one's canonical form is accepted again with the same verdict and the same
// bytes, is no larger than S3 allows, and names only this bucket in every Resource.
func FuzzInspectPolicy(f *testing.F) {
	f.Add([]byte(`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`))
	f.Add([]byte(`{"Statement":{"Effect":"Deny","Resource":["arn:aws:s3:::b","arn:aws:s3:::c"]}}`))
	f.Add([]byte(`{"Version":"2012-10-17","Statement":[{"Sid":"x","Effect":"Deny","NotPrincipal":{"AWS":["a"]},"NotAction":"s3:*","Resource":"arn:aws:s3:::b/*","Condition":{"Bool":{"aws:SecureTransport":false},"NumericLessThan":{"k":1e3}}}]}`))
	f.Add([]byte(`{"Statement":[{"Effect":"Allow","Principal":{"AWS":"a"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}],"statement":[]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		report, err := InspectPolicy(doc, "b", nil)
		var refused *PolicyError
		if err != nil {
			if !errors.As(err, &refused) {
				t.Fatalf("error of another kind: %v", err)
			}
			return
		}
		if len(report.Canonical) > MaxPolicySize {
			t.Fatalf("canonical form of %d bytes", len(report.Canonical))
		}
		again, err := InspectPolicy([]byte(report.Canonical), "b", nil)
		if err != nil {
			t.Fatalf("canonical form refused: %v\n%s", err, report.Canonical)
		}
		if again != report {
			t.Fatalf("canonical form re-parses to %+v, want %+v", again, report)
		}
		parsed, err := parsePolicy([]byte(report.Canonical))
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range parsed.statements {
			for _, res := range st.resource.list {
				if res != "arn:aws:s3:::b" && !strings.HasPrefix(res, "arn:aws:s3:::b/") {
					t.Fatalf("accepted Resource %q", res)
				}
			}
		}
	})
}
