package testenv

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"testing"
	"time"
)

// OtherCluster is a second cluster sharing an Issuer: its signing key is published in
// the key set the issuer serves, beside the control plane's, as when two clusters are
// given one --service-account-issuer and their keys are served together. A store
// trusting the issuer accepts the tokens it signs; nothing in them but the key tells
// them from the control plane's.
type OtherCluster struct {
	issuer *Issuer
	key    *rsa.PrivateKey
	// KID is its key's kid in the key set and its tokens' headers.
	KID string
}

// ShareWith makes a second cluster that signs under the issuer: its key is served in
// the key set from now until Leave or the end of the test.
func (i *Issuer) ShareWith(tb testing.TB) *OtherCluster {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	o := &OtherCluster{issuer: i, key: key, KID: "other-cluster-" + randomString(8, lowerAlnum)}
	i.mu.Lock()
	if i.extraKeys == nil {
		i.extraKeys = map[string]map[string]string{}
	}
	i.extraKeys[o.KID] = map[string]string{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": o.KID,
		"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()), "e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes())}
	i.mu.Unlock()
	tb.Cleanup(o.Leave)
	return o
}

// Leave takes its key out of the issuer's key set. It is idempotent.
func (o *OtherCluster) Leave() {
	o.issuer.mu.Lock()
	defer o.issuer.mu.Unlock()
	delete(o.issuer.extraKeys, o.KID)
}

// Token is a ServiceAccount token of the second cluster, shaped as a kube-apiserver
// issues one: of the issuer, for the ServiceAccount namespace/name, for audience,
// valid for ttl.
func (o *OtherCluster) Token(namespace, name, audience string, ttl time.Duration) (string, error) {
	now := time.Now()
	header, err := json.Marshal(map[string]string{"alg": "RS256", "kid": o.KID, "typ": "JWT"})
	if err != nil {
		return "", err
	}
	claims, err := json.Marshal(map[string]any{
		"iss": o.issuer.URL, "sub": fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name), "aud": []string{audience},
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(ttl).Unix(),
		"kubernetes.io": map[string]any{"namespace": namespace, "serviceaccount": map[string]string{"name": name, "uid": "00000000-0000-0000-0000-000000000000"}},
	})
	if err != nil {
		return "", err
	}
	signed := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, o.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// withExtraKeys adds the keys of the clusters sharing the issuer to a key set the
// control plane served; a body that is no key set is returned as it was.
func (i *Issuer) withExtraKeys(body []byte) []byte {
	i.mu.Lock()
	defer i.mu.Unlock()
	if len(i.extraKeys) == 0 {
		return body
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return body
	}
	for _, k := range i.extraKeys {
		raw, err := json.Marshal(k)
		if err != nil {
			return body
		}
		set.Keys = append(set.Keys, raw)
	}
	out, err := json.Marshal(set)
	if err != nil {
		return body
	}
	return out
}
