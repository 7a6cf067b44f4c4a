package iam

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

func TestTrustPolicyDocument(t *testing.T) {
	r := Role{Name: "bk-c-1", ProviderARN: "arn:aws:iam::123456789012:oidc-provider/oidc.example.com/cluster",
		Issuer: "https://oidc.example.com/cluster", Subject: ServiceAccountSubject("team", "app"), Audience: "s3.example.com",
		MaxSessionDuration: time.Hour}
	doc, err := TrustPolicyDocument(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"sts:AssumeRoleWithWebIdentity",
		"Principal":{"Federated":"arn:aws:iam::123456789012:oidc-provider/oidc.example.com/cluster"},
		"Condition":{"StringEquals":{"oidc.example.com/cluster:sub":"system:serviceaccount:team:app","oidc.example.com/cluster:aud":"s3.example.com"}}}]}`
	if same, err := s3.EquivalentPolicies(doc, want); err != nil || !same {
		t.Errorf("trust policy %s, want %s (%v)", doc, want, err)
	}
	var parsed map[string]any
	if err := json.Unmarshal([]byte(doc), &parsed); err != nil {
		t.Fatal(err)
	}
	for _, broken := range []Role{
		{Issuer: r.Issuer, Subject: r.Subject, Audience: r.Audience},
		{ProviderARN: r.ProviderARN, Subject: r.Subject, Audience: r.Audience},
		{ProviderARN: r.ProviderARN, Issuer: r.Issuer, Audience: r.Audience},
		{ProviderARN: r.ProviderARN, Issuer: r.Issuer, Subject: r.Subject},
	} {
		if doc, err := TrustPolicyDocument(broken); err == nil {
			t.Errorf("a trust policy without one of its parts: %s", doc)
		}
	}
}

func TestConditionKeyPrefix(t *testing.T) {
	for issuer, want := range map[string]string{
		"https://oidc.example.com":         "oidc.example.com",
		"https://oidc.example.com/id/ABCD": "oidc.example.com/id/ABCD",
		"http://plain.example":             "plain.example",
	} {
		if got := ConditionKeyPrefix(issuer); got != want {
			t.Errorf("ConditionKeyPrefix(%q) = %q, want %q", issuer, got, want)
		}
	}
}

// TestDecodePolicy: AWS returns GetRole's trust policy URL-encoded, other stores as
// JSON; both compare as the document the operator wrote.
func TestDecodePolicy(t *testing.T) {
	doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":"arn:aws:iam::1:oidc-provider/x"},"Action":"sts:AssumeRoleWithWebIdentity"}]}`
	encoded := strings.NewReplacer("{", "%7B", "}", "%7D", `"`, "%22", ":", "%3A", ",", "%2C", "[", "%5B", "]", "%5D", "/", "%2F").Replace(doc)
	for _, in := range []string{doc, encoded} {
		if got := decodePolicy(in); got != doc {
			t.Errorf("decodePolicy(%.40s...) = %s", in, got)
		}
	}
}

func TestSameSet(t *testing.T) {
	if !sameSet([]string{"AB", "cd", "ab"}, []string{"cd", "ab"}) {
		t.Error("thumbprints differing in case and repetition are not the same set")
	}
	if sameSet([]string{"ab"}, []string{"ab", "cd"}) {
		t.Error("a subset is the same set")
	}
}
