package objectstore

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
)

// keySet is a JSON Web Key Set of fresh RSA keys, one per kid.
func keySet(t *testing.T, kids ...string) []byte {
	t.Helper()
	var keys []map[string]string
	for _, kid := range kids {
		k, err := rsa.GenerateKey(rand.Reader, 1024) //nolint:gosec // a test key, compared, never trusted
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, map[string]string{"kty": "RSA", "kid": kid,
			"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()), "e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())})
	}
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCheckIssuerKeys: the store is refused (IssuerShared, naming the kid) when the
// issuer publishes a key the cluster does not, and trusted when it publishes the
// cluster's alone. An issuer the operator cannot read refuses the store
// (IssuerUnreachable) unless the spec gives thumbprints: then the key set is said to be
// unchecked, and the issuer is not asked again before WebIdentityRecheck (unless it
// changes). Keys of the cluster that cannot be read refuse the store.
func TestCheckIssuerKeys(t *testing.T) {
	clusterJWKS := keySet(t, "cluster")
	other := keySet(t, "other")
	var served atomic.Value
	served.Store(clusterJWKS)
	var asked atomic.Int64
	var base string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			_, _ = w.Write([]byte(`{"issuer":"` + base + `","jwks_uri":"` + base + `/keys"}`))
		case "/keys":
			_, _ = w.Write(served.Load().([]byte))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	base = srv.URL
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	own, err := iam.ParseKeySet(clusterJWKS)
	if err != nil {
		t.Fatal(err)
	}
	var clusterErr error
	r := &Reconciler{
		IssuerHTTPClient: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}},
		ClusterKeys:      func(context.Context) (iam.KeySet, error) { return own, clusterErr },
	}
	store := func(issuer string, thumbprints ...string) *bkv1.ObjectStore {
		return &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: bkv1.ObjectStoreSpec{AccessProvider: &bkv1.AccessProvider{
			Type: bkv1.AccessProviderIAM, WebIdentity: &bkv1.WebIdentity{Issuer: issuer, Audience: "a", Thumbprints: thumbprints}}}}
	}
	ctx, now := context.Background(), time.Now()

	if refused, unchecked := r.checkIssuerKeys(ctx, store(srv.URL), now); refused != nil || unchecked != "" {
		t.Errorf("the cluster's own key set: %+v %q", refused, unchecked)
	}
	var shared struct{ Keys []json.RawMessage }
	for _, set := range [][]byte{clusterJWKS, other} {
		var s struct{ Keys []json.RawMessage }
		if err := json.Unmarshal(set, &s); err != nil {
			t.Fatal(err)
		}
		shared.Keys = append(shared.Keys, s.Keys...)
	}
	both, _ := json.Marshal(map[string]any{"keys": shared.Keys})
	served.Store(both)
	if refused, _ := r.checkIssuerKeys(ctx, store(srv.URL), now); refused == nil || refused.Reason != bkv1.ReasonIssuerShared || !strings.Contains(refused.Message, "other") {
		t.Errorf("a key set shared with another cluster: %+v", refused)
	}
	served.Store(clusterJWKS)

	clusterErr = errors.New("forbidden")
	if refused, _ := r.checkIssuerKeys(ctx, store(srv.URL), now); refused == nil || refused.Reason != bkv1.ReasonIssuerUnreachable || !strings.Contains(refused.Message, "/openid/v1/jwks") {
		t.Errorf("the cluster's keys unreadable: %+v", refused)
	}
	clusterErr = nil

	gone := "https://127.0.0.1:1"
	if refused, _ := r.checkIssuerKeys(ctx, store(gone), now); refused == nil || refused.Reason != bkv1.ReasonIssuerUnreachable {
		t.Errorf("an unreadable issuer without thumbprints: %+v", refused)
	}
	refused, unchecked := r.checkIssuerKeys(ctx, store(gone, "0123"), now)
	if refused != nil || !strings.Contains(unchecked, "unchecked") {
		t.Errorf("an unreadable issuer with thumbprints: %+v %q", refused, unchecked)
	}
	before := asked.Load()
	if refused, again := r.checkIssuerKeys(ctx, store(gone, "0123"), now.Add(defaults.WebIdentityRecheck/2)); refused != nil || again != unchecked {
		t.Errorf("the unreadable issuer before WebIdentityRecheck: %+v %q", refused, again)
	}
	if refused, _ := r.checkIssuerKeys(ctx, store(srv.URL, "0123"), now.Add(defaults.WebIdentityRecheck/2)); refused != nil || asked.Load() == before {
		t.Errorf("a changed issuer is read at once: %+v, %d requests", refused, asked.Load()-before)
	}
}
