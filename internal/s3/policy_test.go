package s3

import "testing"

// TestEquivalentPolicies covers the rewrites stores and AWS make to a policy between
// PutBucketPolicy and GetBucketPolicy: each must compare equal, so a converged bucket is
// not rewritten every sync, and each real change must compare different.
func TestEquivalentPolicies(t *testing.T) {
	const written = `{"Version":"2012-10-17","Statement":[{"Sid":"R","Effect":"Allow",
		"Principal":{"AWS":["*"]},"Action":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::b/*"]}]}`
	const tls = `{"Version":"2012-10-17","Statement":[{"Sid":"TLS","Effect":"Deny","Principal":{"AWS":"*"},
		"Action":"s3:*","Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"],
		"Condition":{"Bool":{"aws:SecureTransport":false}}}]}`
	const account = `{"Version":"2012-10-17","Statement":[{"Sid":"A","Effect":"Allow",
		"Principal":{"AWS":["123456789012"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`
	cases := []struct {
		name string
		a, b string
		want bool
	}{
		{"one-element arrays become scalars, keys reordered (SeaweedFS)", written,
			`{"Statement":{"Resource":"arn:aws:s3:::b/*","Action":["s3:ListBucket","s3:GetObject"],
			  "Principal":{"AWS":"*"},"Effect":"Allow","Sid":"R"},"Version":"2012-10-17"}`, true},
		{"key order and whitespace only", written,
			`{"Statement":[{"Resource":["arn:aws:s3:::b/*"],"Principal":{"AWS":["*"]},"Sid":"R",` +
				`"Action":["s3:GetObject","s3:ListBucket"],"Effect":"Allow"}],"Version":"2012-10-17"}`, true},
		{"effect changed", written,
			`{"Version":"2012-10-17","Statement":[{"Sid":"R","Effect":"Deny",
			  "Principal":{"AWS":["*"]},"Action":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::b/*"]}]}`, false},
		{"an action removed", written,
			`{"Version":"2012-10-17","Statement":[{"Sid":"R","Effect":"Allow",
			  "Principal":{"AWS":["*"]},"Action":["s3:GetObject"],"Resource":["arn:aws:s3:::b/*"]}]}`, false},
		{"condition false as a string (AWS)", tls,
			`{"Version":"2012-10-17","Statement":[{"Sid":"TLS","Effect":"Deny","Principal":{"AWS":"*"},
			  "Action":"s3:*","Resource":["arn:aws:s3:::b/*","arn:aws:s3:::b"],
			  "Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`, true},
		{"condition in a one-element array", tls,
			`{"Version":"2012-10-17","Statement":[{"Sid":"TLS","Effect":"Deny","Principal":{"AWS":"*"},
			  "Action":["s3:*"],"Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"],
			  "Condition":{"Bool":{"aws:SecureTransport":["false"]}}}]}`, true},
		{"condition flipped", tls,
			`{"Version":"2012-10-17","Statement":[{"Sid":"TLS","Effect":"Deny","Principal":{"AWS":"*"},
			  "Action":"s3:*","Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"],
			  "Condition":{"Bool":{"aws:SecureTransport":"true"}}}]}`, false},
		{"account id returned as its root ARN (AWS)", account,
			`{"Version":"2012-10-17","Statement":[{"Sid":"A","Effect":"Allow",
			  "Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`, true},
		{"another account", account,
			`{"Version":"2012-10-17","Statement":[{"Sid":"A","Effect":"Allow",
			  "Principal":{"AWS":"arn:aws:iam::210987654321:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`, false},
		{"a statement added", written,
			`{"Version":"2012-10-17","Statement":[{"Sid":"R","Effect":"Allow",
			  "Principal":{"AWS":["*"]},"Action":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::b/*"]},
			  {"Sid":"S","Effect":"Deny","Principal":"*","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::b/*"}]}`, false},
	}
	for _, c := range cases {
		for _, pair := range [][2]string{{c.a, c.b}, {c.b, c.a}} {
			got, err := EquivalentPolicies(pair[0], pair[1])
			if err != nil || got != c.want {
				t.Errorf("%s: EquivalentPolicies = %v, %v; want %v", c.name, got, err, c.want)
			}
		}
	}
	if _, err := EquivalentPolicies(written, `{"Version":`); err == nil {
		t.Error("want an error for malformed JSON")
	}
}
