package integration_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestKeylessAccessOnRGW: a BucketAccess for a ServiceAccount on Ceph RGW. Its Secret
// holds no key; the ServiceAccount's token, for the store's audience, assumes the role
// and reaches its bucket and no other, a ReadOnly grant cannot write, and another
// ServiceAccount's token, or a token for another audience, is refused. Nothing secret
// (token, session) reaches a log, an Event, a status or a Secret.
func TestKeylessAccessOnRGW(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rgwSTS, withIAMOn(rgwSTS), withWebIdentity())
	f.waitStoreCondition(bkv1.ConditionWebIdentityReady, metav1.ConditionTrue)
	store := &bkv1.ObjectStore{}
	must(t, k8s.Get(f.ctx, types.NamespacedName{Name: f.store}, store))
	if w := store.Status.WebIdentity; w == nil || !slices.Equal(w.Thumbprints, []string{issuer.Thumbprint}) || w.ProviderARN == "" {
		t.Fatalf("status.webIdentity = %+v; want the issuer's thumbprint %s, computed, and the provider", w, issuer.Thumbprint)
	}
	data := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	other := f.waitCondition(f.bucket("other"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	must(t, f.admin.PutObject(f.ctx, other, "theirs", []byte("other's")))

	ba := f.waitAccessReady(f.keylessAccess("app", "app-creds", "app", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
	f.waitAccessReady(f.keylessAccess("reader", "reader-creds", "reader", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadOnly}))
	if ba.Status.RoleARN == "" || ba.Status.TokenAudience != keylessAudience || ba.Status.AccessKeyID != "" {
		t.Fatalf("status: role %q, audience %q, key %q", ba.Status.RoleARN, ba.Status.TokenAudience, ba.Status.AccessKeyID)
	}
	secret := &corev1.Secret{}
	must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "app-creds"}, secret))
	for _, k := range []string{bkv1.AccessSecretKeyAccessKeyID, bkv1.AccessSecretKeySecretKey} {
		if _, ok := secret.Data[k]; ok {
			t.Errorf("the keyless Secret holds %s", k)
		}
	}
	if got := string(secret.Data[bkv1.AccessSecretKeyWebIdentityTokenFile]); got != bkv1.WebIdentityTokenPath {
		t.Errorf("%s = %q, want %q", bkv1.AccessSecretKeyWebIdentityTokenFile, got, bkv1.WebIdentityTokenPath)
	}

	token := f.serviceAccountToken("app", keylessAudience)
	app, err := f.assume(f.secretData("app-creds"), token)
	must(t, err)
	must(t, app.c.PutObject(f.ctx, data, "mine", []byte("written keyless")))
	if body, err := app.c.GetObject(f.ctx, data, "mine", 100); err != nil || string(body) != "written keyless" {
		t.Fatalf("reading back through the session: %q, %v", body, err)
	}
	if err := app.c.PutObject(f.ctx, other, "intrusion", []byte("x")); !refused(err) {
		t.Errorf("the session wrote another bucket: %v", err)
	}
	if _, err := app.c.GetObject(f.ctx, other, "theirs", 100); !refused(err) {
		t.Errorf("the session read another bucket: %v", err)
	}
	reader, err := f.assume(f.secretData("reader-creds"), f.serviceAccountToken("reader", keylessAudience))
	must(t, err)
	if body, err := reader.c.GetObject(f.ctx, data, "mine", 100); err != nil || string(body) != "written keyless" {
		t.Errorf("the ReadOnly session reads: %q, %v", body, err)
	}
	if err := reader.c.PutObject(f.ctx, data, "mine", []byte("overwritten")); !refused(err) {
		t.Errorf("the ReadOnly session wrote: %v", err)
	}
	if _, err := f.assume(f.secretData("app-creds"), f.serviceAccountToken("intruder", keylessAudience)); !refused(err) {
		t.Errorf("another ServiceAccount's token assumed the role: %v", err)
	}
	if _, err := f.assume(f.secretData("app-creds"), f.serviceAccountToken("app", "another-audience")); !refused(err) {
		t.Errorf("a token for another audience assumed the role: %v", err)
	}
	if body, err := f.admin.GetObject(f.ctx, other, "theirs", 100); err != nil || string(body) != "other's" {
		t.Errorf("the other bucket's data changed: %q, %v", body, err)
	}
	if _, err := f.admin.GetObject(f.ctx, other, "intrusion", 100); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("the other bucket holds the session's object: %v", err)
	}

	// Nothing secret is written anywhere the operator writes.
	f.writtenNowhere(token, app.secretKey, app.sessionSecret, reader.secretKey, reader.sessionSecret)

	// Deleting the access deletes its role: the token assumes nothing any more, and
	// the session already issued is refused too (RGW checks its role on each request).
	role, appSecret := ba.Status.IdentityName, f.secretData("app-creds")
	must(t, k8s.Delete(f.ctx, ba))
	f.waitRoleGone(rgwSTS, role)
	if _, err := f.assume(appSecret, f.serviceAccountToken("app", keylessAudience)); !refused(err) {
		t.Errorf("the app's token assumed the deleted role: %v", err)
	}
	if sent := iamRequests.snapshot(f.store); sent["CreateRole"] != 2 || sent["DeleteRole"] < 1 {
		t.Errorf("IAM requests on the store: %v; want a CreateRole per access, and the deleted one's DeleteRole", sent)
	}
	f.eventually(30*time.Second, "the deleted role's session refused", func() error {
		if err := app.c.PutObject(f.ctx, data, "after", []byte("x")); !refused(err) {
			return fmt.Errorf("still writes: %v", err)
		}
		return nil
	})
}

// TestKeylessRoleOutlivesNoStrippedFinalizer: a tenant strips the operator's finalizer
// from its keyless access and deletes it; the collector deletes the role all the same,
// and the ServiceAccount's token then assumes nothing.
func TestKeylessRoleOutlivesNoStrippedFinalizer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rgwSTS, withIAMOn(rgwSTS), withWebIdentity())
	f.waitStoreCondition(bkv1.ConditionWebIdentityReady, metav1.ConditionTrue)
	data := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	ba := f.waitAccessReady(f.keylessAccess("app", "app-creds", "app", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
	token := f.serviceAccountToken("app", keylessAudience)
	app, err := f.assume(f.secretData("app-creds"), token)
	must(t, err)
	must(t, app.c.PutObject(f.ctx, data, "before", []byte("x")))
	secret := f.secretData("app-creds") // what the application keeps

	stripFinalizerAndDelete(f, tenantClient(t, f), ba)
	role := ba.Status.IdentityName
	f.waitRoleGone(rgwSTS, role)
	if _, err := f.assume(secret, token); !refused(err) {
		t.Errorf("the token assumed the collected role: %v", err)
	}
}

// TestKeylessAccessRefusedWhereTheStoreCannot: SeaweedFS keeps no inline role
// policies. Its store says so (WebIdentityReady=False, NotSupportedByStore), and a
// keyless access on it is refused with that reason: no role and no user is made.
func TestKeylessAccessRefusedWhereTheStoreCannot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, seaweed, withIAMOn(seaweed), withWebIdentity())
	f.waitStoreDistrusts(bkv1.ReasonNotSupportedByStore)
	f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	ba := f.waitAccessCondition(f.keylessAccess("app", "app-creds", "app", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}),
		bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonNotSupportedByStore)
	if ba.Status.RoleARN != "" || ba.Status.AccessKeyID != "" {
		t.Errorf("status records a role %q or a key %q", ba.Status.RoleARN, ba.Status.AccessKeyID)
	}
	user := iam.UserName(clusterID, string(ba.UID))
	if slices.Contains(roleNames(t, seaweed), user) || slices.Contains(allUserNames(t, seaweed), user) {
		t.Errorf("a role or user %s was made on a store that cannot hold its policy", user)
	}
	sent := iamRequests.snapshot(f.store)
	// (One PutRolePolicy is the store's check, on a role that does not exist.)
	for _, op := range []string{"CreateRole", "CreateUser", "PutUserPolicy", "CreateAccessKey"} {
		if sent[op] > 0 {
			t.Errorf("%d %s sent to a store that cannot hold a role's policy", sent[op], op)
		}
	}
	if err := k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "app-creds"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Secret was written for a refused access: %v", err)
	}
}

// TestKeylessAccessNamesOnlyItsNamespace: a tenant cannot name another namespace's
// ServiceAccount in any form (the name is a DNS subdomain, so neither
// "ns:name" nor "system:serviceaccount:ns:name" passes), nor switch an access
// between a key and a role; nothing reaches the store.
func TestKeylessAccessNamesOnlyItsNamespace(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rgwSTS, withIAMOn(rgwSTS), withWebIdentity())
	tenant := tenantClient(t, f)
	for _, name := range []string{"kube-system:default", "system:serviceaccount:kube-system:default", "../default", "Default"} {
		ba := &bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "evil"},
			Spec: bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{{Name: "data", Mode: bkv1.AccessReadWrite}}, SecretName: "evil", ServiceAccountName: name}}
		f.eventually(30*time.Second, "the tenant's create refused as invalid", func() error {
			err := tenant.Create(f.ctx, ba)
			if apierrors.IsInvalid(err) {
				return nil
			}
			if err == nil {
				t.Fatalf("serviceAccountName %q was admitted", name)
			}
			return err // the tenant's Role may not be known to the authorizer yet
		})
	}
	keyed := f.access("keyed", "keyed-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite})
	f.eventually(30*time.Second, "switching a key access to a role refused as invalid", func() error {
		if err := tenant.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: keyed.Name}, keyed); err != nil {
			return err
		}
		keyed.Spec.ServiceAccountName = "default"
		err := tenant.Update(f.ctx, keyed)
		if apierrors.IsInvalid(err) {
			return nil
		}
		if err == nil {
			t.Fatal("a key access was switched to a role")
		}
		return err // a conflict with the operator's write: read it again
	})
	for op, n := range iamRequests.snapshot(f.store) {
		if strings.Contains(op, "Role") && op != "PutRolePolicy" || op == "CreateUser" || op == "CreateAccessKey" {
			// PutRolePolicy is the store's check (on a role that does not exist).
			t.Errorf("%d %s sent for refused accesses", n, op)
		}
	}
	if slices.Contains(roleNames(t, rgwSTS), iam.UserName(clusterID, string(keyed.UID))) {
		t.Errorf("a role was made for the key access")
	}
}

// TestKeylessRoleFollowsItsGrant: the role is what the access grants now. Re-pointed
// from one bucket to another, a new session reaches the new bucket and not the old
// one, and so does the session issued before (RGW reads a session's role policy on
// each request). When the store's admin stops allowing the namespace, the role is
// deleted and the token assumes nothing; allowed again, the role is made again.
func TestKeylessRoleFollowsItsGrant(t *testing.T) {
	t.Parallel()
	const allowed = "test.bucketkeeper.io/allowed"
	f := newFixture(t, rgwSTS, withIAMOn(rgwSTS), withWebIdentity(), func(s *bkv1.ObjectStore) {
		s.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{allowed: "true"}}
	})
	yes := "true"
	f.labelNamespace(allowed, &yes)
	f.waitStoreCondition(bkv1.ConditionWebIdentityReady, metav1.ConditionTrue)
	first := f.waitCondition(f.bucket("first"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	second := f.waitCondition(f.bucket("second"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	ba := f.waitAccessReady(f.keylessAccess("app", "app-creds", "app", bkv1.BucketGrant{Name: "first", Mode: bkv1.AccessReadWrite}))
	token := f.serviceAccountToken("app", keylessAudience)
	early, err := f.assume(f.secretData("app-creds"), token)
	must(t, err)
	must(t, early.c.PutObject(f.ctx, first, "early", []byte("x")))

	f.update(k8s, ba, func() { ba.Spec.Buckets = []bkv1.BucketGrant{{Name: "second", Mode: bkv1.AccessReadWrite}} })
	f.eventually(60*time.Second, "the early session refused on the bucket no longer granted", func() error {
		if err := early.c.PutObject(f.ctx, first, "late", []byte("x")); !refused(err) {
			return fmt.Errorf("still writes: %v", err)
		}
		return nil
	})
	f.eventually(60*time.Second, "a new session writes the bucket granted now", func() error {
		s, err := f.assume(f.secretData("app-creds"), token)
		if err != nil {
			return err
		}
		return s.c.PutObject(f.ctx, second, "new", []byte("x"))
	})
	now, err := f.assume(f.secretData("app-creds"), token)
	must(t, err)
	if err := now.c.PutObject(f.ctx, first, "new", []byte("x")); !refused(err) {
		t.Errorf("a new session wrote the bucket no longer granted: %v", err)
	}

	secret := f.secretData("app-creds")
	f.labelNamespace(allowed, nil)
	got := f.waitAccessCondition(ba, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonBucketRefused)
	if got.Status.RoleARN != "" {
		t.Errorf("status still records role %s", got.Status.RoleARN)
	}
	if slices.Contains(roleNames(t, rgwSTS), got.Status.IdentityName) {
		t.Errorf("role %s is still on the store", got.Status.IdentityName)
	}
	if _, err := f.assume(secret, token); !refused(err) {
		t.Errorf("the token assumed the role of a refused bucket: %v", err)
	}
	if err := now.c.PutObject(f.ctx, second, "refused", []byte("x")); !refused(err) {
		t.Errorf("a session wrote a bucket its namespace may no longer use: %v", err)
	}

	f.labelNamespace(allowed, &yes)
	f.waitAccessReady(ba)
	f.eventually(60*time.Second, "a session of the role made again writes", func() error {
		s, err := f.assume(f.secretData("app-creds"), token)
		if err != nil {
			return err
		}
		return s.c.PutObject(f.ctx, second, "again", []byte("x"))
	})
}

// TestKeylessStoreReportsAnUnreachableIssuer: a store told to trust an issuer the
// operator cannot read says so (WebIdentityReady=False, IssuerUnreachable), and a
// keyless access on it waits (WebIdentityNotReady) with nothing written to the store
// (the access collector's sweep may list its roles meanwhile: it deletes only those
// of accesses that are gone).
func TestKeylessStoreReportsAnUnreachableIssuer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rgwSTS, withIAMOn(rgwSTS), func(s *bkv1.ObjectStore) {
		s.Spec.AccessProvider.WebIdentity = &bkv1.WebIdentity{Issuer: "https://nowhere.bucketkeeper.test", Audience: keylessAudience}
	})
	f.waitStoreDistrusts(bkv1.ReasonIssuerUnreachable)
	f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	f.waitAccessCondition(f.keylessAccess("app", "app-creds", "app", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}),
		bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonWebIdentityNotReady)
	for op, n := range iamRequests.snapshot(f.store) {
		if strings.HasPrefix(op, "List") {
			continue
		}
		if strings.Contains(op, "Role") || strings.Contains(op, "OpenIDConnect") || op == "CreateUser" {
			t.Errorf("%d %s sent for a store whose issuer cannot be read", n, op)
		}
	}
}

// TestKeylessAccessOnAWSShape: on moto, AWS's shape of keyless access: the provider,
// the role and its trust policy are made as on AWS, and a session of the role reaches
// the bucket. (moto checks no token and no trust policy: isolation is proven on RGW.)
func TestKeylessAccessOnAWSShape(t *testing.T) {
	t.Parallel()
	f := newFixture(t, moto, withIAMOn(moto), withWebIdentity())
	f.waitStoreCondition(bkv1.ConditionWebIdentityReady, metav1.ConditionTrue)
	data := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	ba := f.waitAccessReady(f.keylessAccess("app", "app-creds", "app", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
	if !strings.HasPrefix(ba.Status.RoleARN, "arn:aws:iam::") || !strings.HasSuffix(ba.Status.RoleARN, ":role/"+ba.Status.IdentityName) {
		t.Errorf("role ARN %q is not AWS's form for role %s", ba.Status.RoleARN, ba.Status.IdentityName)
	}
	session, err := f.assume(f.secretData("app-creds"), f.serviceAccountToken("app", keylessAudience))
	must(t, err)
	must(t, session.c.PutObject(f.ctx, data, "keyless", []byte("x")))
	must(t, k8s.Delete(f.ctx, ba))
	f.waitRoleGone(moto, ba.Status.IdentityName)
}
