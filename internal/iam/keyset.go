package iam

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// A store that trusts an issuer accepts every token signed by a key of the issuer's key
// set, whatever cluster signed it: a ServiceAccount token names its namespace and name
// (sub) and an audience the Pod chose, nothing that tells one cluster from another. So
// keyless trust is bound to one cluster by its issuer's keys: every key the issuer
// publishes must be one the cluster's own API server publishes (its
// /openid/v1/jwks), or a second cluster signing under the same issuer could assume the
// first one's roles with tokens of a namespace and ServiceAccount of the same names.

// KeySet is a JSON Web Key Set by key: each key's RFC 7638 thumbprint (what identifies
// a public key whatever its kid or member order) mapped to its kid.
type KeySet map[string]string

// ParseKeySet reads a JSON Web Key Set. A key of a type it does not know is identified
// by its whole (compacted) JSON, so two sets still compare equal on it only where they
// publish it byte for byte the same.
func ParseKeySet(body []byte) (KeySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("not a JSON Web Key Set: %w", err)
	}
	set := KeySet{}
	for i, raw := range doc.Keys {
		id, kid, err := keyThumbprint(raw)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		set[id] = kid
	}
	return set, nil
}

// keyThumbprint is a key's RFC 7638 thumbprint (base64url of the SHA-256 of its
// required members, sorted, without whitespace) and its kid.
func keyThumbprint(raw json.RawMessage) (id, kid string, err error) {
	var k map[string]any
	if err := json.Unmarshal(raw, &k); err != nil {
		return "", "", err
	}
	kid, _ = k["kid"].(string)
	var required []string
	switch k["kty"] {
	case "RSA":
		required = []string{"e", "kty", "n"}
	case "EC":
		required = []string{"crv", "kty", "x", "y"}
	case "OKP":
		required = []string{"crv", "kty", "x"}
	default:
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			return "", "", err
		}
		return "raw:" + compact.String(), kid, nil
	}
	members := map[string]string{}
	for _, m := range required {
		v, ok := k[m].(string)
		if !ok || v == "" {
			return "", "", fmt.Errorf("a %v key without %q", k["kty"], m)
		}
		members[m] = v
	}
	canonical, err := json.Marshal(members) // encoding/json sorts map keys
	if err != nil {
		return "", "", err
	}
	sum := sha256.Sum256(canonical)
	return base64.RawURLEncoding.EncodeToString(sum[:]), kid, nil
}

// Foreign returns the kids (or thumbprints, for a key without one) of the keys of s
// that own does not hold, sorted.
func (s KeySet) Foreign(own KeySet) []string {
	var out []string
	for id, kid := range s {
		if _, ok := own[id]; ok {
			continue
		}
		if kid == "" {
			kid = strings.TrimPrefix(id, "raw:")
		}
		out = append(out, kid)
	}
	sort.Strings(out)
	return out
}

// IssuerKeySet reads the key set an issuer publishes, as a store does: the discovery
// document (<issuer>/.well-known/openid-configuration) names it (jwks_uri). hc must
// verify TLS; ctx bounds the whole lookup, and each document is read up to
// maxIssuerDocument bytes.
func IssuerKeySet(ctx context.Context, hc *http.Client, issuer string) (KeySet, error) {
	jwks, err := jwksURI(ctx, hc, issuer)
	if err != nil {
		return nil, err
	}
	body, _, err := getIssuerDocument(ctx, hc, jwks)
	if err != nil {
		return nil, err
	}
	set, err := ParseKeySet(body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", jwks, err)
	}
	return set, nil
}

// jwksURI reads the issuer's discovery document and returns the https key set URL it
// names.
func jwksURI(ctx context.Context, hc *http.Client, issuer string) (string, error) {
	discovery := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	body, _, err := getIssuerDocument(ctx, hc, discovery)
	if err != nil {
		return "", err
	}
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("the discovery document at %s is not JSON: %w", discovery, err)
	}
	if u, err := url.Parse(doc.JWKSURI); err != nil || u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("the discovery document at %s names no https jwks_uri (%q)", discovery, doc.JWKSURI)
	}
	return doc.JWKSURI, nil
}
