package integration_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestKeylessTrustIsBoundToTheCluster: a second cluster comes to share the cluster's
// issuer (its signing key published in the issuer's key set beside the control
// plane's), and a hostile tenant of it mints a token for a ServiceAccount of the same
// namespace and name as a keyless access of this cluster, for the store's audience:
// a token Ceph RGW would accept for the access's role. The store stops trusting the
// issuer (WebIdentityReady=False, IssuerShared), the access's role is deleted (the
// access reports IssuerShared), and the second cluster's token assumes nothing, nor
// does this cluster's. A store set up while the issuer is shared is refused before
// anything is registered on it. Once the second cluster's key leaves the key set, the
// store trusts the issuer again and the role is made again for this cluster's tokens.
//
// Not parallel: it changes the suite's issuer, which the stores of the other keyless
// tests trust, so it runs while none of them does.
func TestKeylessTrustIsBoundToTheCluster(t *testing.T) {
	f := newFixture(t, rgwSTS, withIAMOn(rgwSTS), withWebIdentity())
	f.waitStoreCondition(bkv1.ConditionWebIdentityReady, metav1.ConditionTrue)
	data := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	ba := f.waitAccessReady(f.keylessAccess("app", "app-creds", "app", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
	role, secret := ba.Status.IdentityName, f.secretData("app-creds")
	mine, err := f.assume(secret, f.serviceAccountToken("app", keylessAudience))
	must(t, err)
	must(t, mine.c.PutObject(f.ctx, data, "mine", []byte("this cluster's")))

	other := issuer.ShareWith(t)
	theirs, err := other.Token(f.ns, "app", keylessAudience, 10*time.Minute)
	must(t, err)
	f.waitStoreDistrusts(bkv1.ReasonIssuerShared)
	f.waitAccessCondition(ba, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonIssuerShared)
	f.waitRoleGone(rgwSTS, role)
	if _, err := f.assume(secret, theirs); !refused(err) {
		t.Errorf("the other cluster's token assumed this cluster's role: %v", err)
	}
	if _, err := f.assume(secret, f.serviceAccountToken("app", keylessAudience)); !refused(err) {
		t.Errorf("a token assumed the role of a store whose issuer is shared: %v", err)
	}
	f.eventually(30*time.Second, "the deleted role's session refused", func() error {
		if err := mine.c.PutObject(f.ctx, data, "after", []byte("x")); !refused(err) {
			return fmt.Errorf("still writes: %v", err)
		}
		return nil
	})
	if body, err := f.admin.GetObject(f.ctx, data, "mine", 100); err != nil || string(body) != "this cluster's" {
		t.Errorf("the bucket's data: %q, %v", body, err)
	}

	// A store set up now is refused before any registration reaches it.
	g := newFixture(t, rgwSTS, withIAMOn(rgwSTS), withWebIdentity())
	g.waitStoreDistrusts(bkv1.ReasonIssuerShared)
	for op, n := range iamRequests.snapshot(g.store) {
		if strings.Contains(op, "OpenIDConnect") || strings.Contains(op, "Role") {
			t.Errorf("%d %s sent to a store whose issuer is shared", n, op)
		}
	}

	// The second cluster leaves the issuer: the trust and the role come back.
	other.Leave()
	f.waitStoreCondition(bkv1.ConditionWebIdentityReady, metav1.ConditionTrue)
	f.waitAccessReady(ba)
	f.eventually(60*time.Second, "a session of the role made again writes", func() error {
		s, err := f.assume(f.secretData("app-creds"), f.serviceAccountToken("app", keylessAudience))
		if err != nil {
			return err
		}
		return s.c.PutObject(f.ctx, data, "again", []byte("x"))
	})
}
