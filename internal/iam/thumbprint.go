package iam

import (
	"context"
	"crypto/sha1" //nolint:gosec // a provider's thumbprint is SHA-1 by definition (AWS, RGW)
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
)

// maxIssuerDocument bounds what Thumbprint and IssuerKeySet read of the issuer's
// discovery document and key set: both are a few kilobytes.
const maxIssuerDocument = 256 << 10

// Thumbprint computes the thumbprint a store checks an issuer's key set host
// against, as AWS documents it and Ceph RGW compares it: the issuer's discovery
// document (<issuer>/.well-known/openid-configuration) names the key set (jwks_uri);
// the thumbprint is the SHA-1, in 40 lowercase hex digits, of the last certificate
// the key set's host presents (its chain's top CA, or its only certificate). hc must
// verify TLS: a thumbprint taken over a connection nobody vouched for would pin
// whoever answered. ctx bounds the whole lookup.
func Thumbprint(ctx context.Context, hc *http.Client, issuer string) (string, error) {
	jwks, err := jwksURI(ctx, hc, issuer)
	if err != nil {
		return "", err
	}
	_, resp, err := getIssuerDocument(ctx, hc, jwks)
	if err != nil {
		return "", err
	}
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
		return "", fmt.Errorf("%s presented no certificate", jwks)
	}
	certs := resp.TLS.PeerCertificates
	sum := sha1.Sum(certs[len(certs)-1].Raw) //nolint:gosec // see the import
	return hex.EncodeToString(sum[:]), nil
}

// getIssuerDocument GETs one of the issuer's documents, bounded, and fails on
// anything but 200.
func getIssuerDocument(ctx context.Context, hc *http.Client, u string) ([]byte, *http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("fetching %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIssuerDocument+1))
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("reading %s: %w", u, err)
	case len(body) > maxIssuerDocument:
		return nil, nil, fmt.Errorf("%s is larger than %d bytes", u, maxIssuerDocument)
	case resp.StatusCode != http.StatusOK:
		return nil, nil, fmt.Errorf("%s answered %s", u, resp.Status)
	}
	return body, resp, nil
}
