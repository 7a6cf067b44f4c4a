package iam

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bucketkeeper/bucketkeeper/internal/awspolicy"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// keylessEnv is the cluster side of the keyless contract: an issuer and a control
// plane that signs ServiceAccount tokens for it. Every store's case shares it; the
// first to need it starts it, and TestMain stops it.
type keylessEnv struct {
	issuer *testenv.Issuer
	cp     *testenv.ControlPlane
	cs     kubernetes.Interface
}

// keylessNamespace holds the ServiceAccounts whose tokens the cases use.
const keylessNamespace = "apps"

var (
	keylessOnce   sync.Once
	keylessShared *keylessEnv
	keylessErr    error
)

// contractRequests records what the contract's drivers send (newDriver): keys and
// roles on every store, keyless on Ceph RGW and moto. Each request but the tests' own
// cleanup must be one whose AWS actions internal/awspolicy lists.
var contractRequests = &awspolicy.Recorder{}

func TestMain(m *testing.M) {
	code := m.Run()
	// DeleteOIDCProvider: the tests' cleanup; the operator never calls it.
	for _, missing := range contractRequests.Missing("DeleteOpenIDConnectProvider") {
		fmt.Fprintf(os.Stderr, "FAIL: the IAM driver sent %s (add the action to internal/awspolicy, then make docs)\n", missing)
		code = 1
	}
	if keylessShared != nil {
		if err := keylessShared.cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
		_ = keylessShared.issuer.Close()
	}
	os.Exit(code)
}

// sharedKeyless starts (once) and returns the issuer and its control plane.
func sharedKeyless(t *testing.T) *keylessEnv {
	t.Helper()
	keylessOnce.Do(func() {
		iss, err := testenv.NewIssuer()
		if err != nil {
			keylessErr = err
			return
		}
		cp, err := testenv.StartControlPlaneWith(testenv.ControlPlaneOptions{Issuer: iss})
		if err != nil {
			_ = iss.Close()
			keylessErr = err
			return
		}
		e := &keylessEnv{issuer: iss, cp: cp, cs: kubernetes.NewForConfigOrDie(cp.Config)}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, keylessErr = e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keylessNamespace}}, metav1.CreateOptions{})
		keylessShared = e
	})
	if keylessErr != nil {
		t.Fatalf("the issuer and its control plane: %v", keylessErr)
	}
	return keylessShared
}

// token is a fresh token of the ServiceAccount sa (made if missing) for audience,
// as a projected volume would hold it.
func (e *keylessEnv) token(ctx context.Context, t *testing.T, sa, audience string) string {
	t.Helper()
	_, err := e.cs.CoreV1().ServiceAccounts(keylessNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("ServiceAccount %s: %v", sa, err)
	}
	expiry := int64(600)
	tr, err := e.cs.CoreV1().ServiceAccounts(keylessNamespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", sa, err)
	}
	return tr.Status.Token
}
