package iam

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Keyless access: instead of a user and a key, a BucketAccess for a ServiceAccount
// gets a role whose trust policy admits web-identity tokens of one issuer, for one
// subject and one audience, and whose one inline policy is the same document a user
// for the same grants carries (PolicyDocument). The application exchanges its
// ServiceAccount token for a short session (STS AssumeRoleWithWebIdentity): no key
// exists to be copied. The issuer is registered once per store as an OpenID Connect
// provider.

// Roles is everything the operator does on an IAM endpoint for keyless access. Every
// method is idempotent and returns nil or an *Error, as Driver's do.
type Roles interface {
	// EnsureOIDCProvider registers p's issuer as an OpenID Connect provider, or brings
	// an existing provider of that URL to p's thumbprints and adds p's audiences to it
	// (none is removed: another store of the same account may trust the same issuer
	// for another audience, and each role's trust policy names its own). It returns
	// the provider's ARN.
	EnsureOIDCProvider(ctx context.Context, p OIDCProvider) (string, error)
	// DeleteOIDCProvider deletes a provider; a missing one is success. The operator
	// never calls it (a provider grants nothing without roles, and other stores of
	// the account may trust it); tests clean up with it.
	DeleteOIDCProvider(ctx context.Context, arn string) error
	// CheckRoles sends the cheapest call that proves the endpoint keeps inline role
	// policies, which keyless access needs: PutRolePolicy on a role that does not
	// exist, answered NoSuchEntity (nil). A store without them answers
	// NotImplemented.
	CheckRoles(ctx context.Context, clusterID string) error
	// EnsureRole creates the role, or brings an existing role of that name (the name
	// carries its access's identity, see UserName) to r's trust policy and session
	// duration. It returns the role's ARN.
	EnsureRole(ctx context.Context, r Role) (string, error)
	// PutRolePolicy sets the role's one inline policy to the grants.
	PutRolePolicy(ctx context.Context, role string, grants []Grant) error
	// DeleteRolePolicy removes the role's inline policy, so its sessions reach
	// nothing; a missing role or policy is success.
	DeleteRolePolicy(ctx context.Context, role string) error
	// DeleteRole deletes the inline policy and the role; a missing role is success,
	// and so is a store without inline role policies: it has none to delete.
	DeleteRole(ctx context.Context, role string) error
	// ListRoles returns one page of at most limit roles after marker ("" for the
	// first page); the page's Next is "" on the last one.
	ListRoles(ctx context.Context, marker string, limit int) (RolePage, error)
}

// RolesOf returns the role operations of a driver, where it has them (the SDK client
// does; a test's fake may not).
func RolesOf(d Driver) (Roles, bool) {
	r, ok := d.(Roles)
	return r, ok
}

// OIDCProvider is a web-identity token issuer as a store registers it.
type OIDCProvider struct {
	// URL is the issuer, https://..., exactly as tokens name it (iss).
	URL string
	// Audiences are the client IDs a token's aud must be among.
	Audiences []string
	// Thumbprints are SHA-1 (40 hex) of the certificate the key set's host presents
	// last (see Thumbprint).
	Thumbprints []string
}

// Role is one access's role.
type Role struct {
	Name string
	// ProviderARN is the OIDC provider the trust policy names as principal.
	ProviderARN string
	// Issuer is the provider's URL, whose host and path prefix the condition keys.
	Issuer string
	// Subject is the token's sub the role admits (ServiceAccountSubject).
	Subject string
	// Audience is the token's aud the role admits.
	Audience string
	// MaxSessionDuration bounds the sessions AssumeRoleWithWebIdentity grants
	// (IAM's range: 1h to 12h).
	MaxSessionDuration time.Duration
}

// RoleRef is one role of a ListRoles page.
type RoleRef struct {
	Name string
	ARN  string
	// Created is when the role was made; zero where the store does not say.
	Created time.Time
}

// RolePage is one page of ListRoles.
type RolePage struct {
	Roles []RoleRef
	// Next is the marker of the following page; "" when this page is the last.
	Next string
}

// ServiceAccountSubject is the sub of a Kubernetes ServiceAccount's tokens.
func ServiceAccountSubject(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// ConditionKeyPrefix is how a trust policy's condition keys name an issuer: its
// URL without the scheme (AWS's <provider>:sub and :aud; Ceph RGW builds the same
// keys from the token's iss).
func ConditionKeyPrefix(issuer string) string {
	return strings.TrimPrefix(strings.TrimPrefix(issuer, "https://"), "http://")
}

type trustStatement struct {
	Effect    string                       `json:"Effect"`
	Principal map[string]string            `json:"Principal"`
	Action    string                       `json:"Action"`
	Condition map[string]map[string]string `json:"Condition"`
}

type trustDocument struct {
	Version   string           `json:"Version"`
	Statement []trustStatement `json:"Statement"`
}

// TrustPolicyDocument renders the role's trust policy: AssumeRoleWithWebIdentity
// for tokens of the provider whose sub and aud are exactly the role's, nothing else.
func TrustPolicyDocument(r Role) (string, error) {
	switch {
	case r.ProviderARN == "":
		return "", fmt.Errorf("iam: a trust policy needs the OIDC provider's ARN")
	case r.Issuer == "" || r.Subject == "" || r.Audience == "":
		return "", fmt.Errorf("iam: a trust policy needs the issuer, the subject and the audience")
	}
	prefix := ConditionKeyPrefix(r.Issuer)
	doc := trustDocument{Version: "2012-10-17", Statement: []trustStatement{{
		Effect:    "Allow",
		Principal: map[string]string{"Federated": r.ProviderARN},
		Action:    "sts:AssumeRoleWithWebIdentity",
		Condition: map[string]map[string]string{"StringEquals": {prefix + ":sub": r.Subject, prefix + ":aud": r.Audience}},
	}}}
	b, err := json.Marshal(doc)
	return string(b), err
}

// probeRoleName is a role no one has: CheckRoles asks the store to set its policy.
func probeRoleName(clusterID string) string {
	return "bk-" + ClusterTag(clusterID) + "-probe-no-such-role"
}
