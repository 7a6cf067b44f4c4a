package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// Keyless access (BucketAccess spec.serviceAccountName) against the suite's real
// control plane, whose ServiceAccount tokens the issuer serves on port 443 to the
// stores: a token of the named ServiceAccount, for the store's audience, is exchanged
// at the store's STS for a session of the access's role, exactly as an AWS SDK's
// default credential chain does with the Secret's values. Ceph RGW checks tokens end to
// end; SeaweedFS keeps no inline role policies and is refused with a reason.

const keylessAudience = "bucketkeeper-test"

// withWebIdentity makes the store trust the suite's ServiceAccount tokens, with no
// thumbprint given: the operator computes it.
func withWebIdentity() func(*bkv1.ObjectStore) {
	return func(s *bkv1.ObjectStore) {
		s.Spec.AccessProvider.WebIdentity = &bkv1.WebIdentity{Issuer: issuer.URL, Audience: keylessAudience}
	}
}

// keylessAccess creates a BucketAccess for ServiceAccount sa (made here) of the
// fixture's namespace.
func (f *fixture) keylessAccess(name, secret, sa string, grants ...bkv1.BucketGrant) *bkv1.BucketAccess {
	f.t.Helper()
	err := k8s.Create(f.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: sa}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		f.t.Fatal(err)
	}
	return f.createAccess(&bkv1.BucketAccess{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       bkv1.BucketAccessSpec{Buckets: grants, SecretName: secret, ServiceAccountName: sa},
	})
}

// secretData is the data of the namespace's Secret name.
func (f *fixture) secretData(name string) map[string][]byte {
	f.t.Helper()
	secret := &corev1.Secret{}
	must(f.t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: name}, secret))
	return secret.Data
}

// writtenNowhere fails the test if any value of secrets is in the operator's log, a
// Secret, an Event or a status of the fixture's namespace.
func (f *fixture) writtenNowhere(secrets ...string) {
	f.t.Helper()
	holds := func(s string) bool {
		for _, v := range secrets {
			if v != "" && strings.Contains(s, v) {
				return true
			}
		}
		return false
	}
	if holds(logs.String()) {
		f.t.Error("the operator's log holds a token or a session secret")
	}
	list := &corev1.SecretList{}
	must(f.t, k8s.List(f.ctx, list, client.InNamespace(f.ns)))
	for _, s := range list.Items {
		for k, d := range s.Data {
			if holds(string(d)) {
				f.t.Errorf("Secret %s key %s holds a token or a session secret", s.Name, k)
			}
		}
	}
	events := &eventsv1.EventList{}
	must(f.t, k8s.List(f.ctx, events, client.InNamespace(f.ns)))
	for _, e := range events.Items {
		if holds(e.Note) {
			f.t.Errorf("Event %s holds a token or a session secret", e.Name)
		}
	}
	accesses := &bkv1.BucketAccessList{}
	must(f.t, k8s.List(f.ctx, accesses, client.InNamespace(f.ns)))
	for _, ba := range accesses.Items {
		if b, _ := json.Marshal(ba.Status); holds(string(b)) {
			f.t.Errorf("the status of access %s holds a token or a session secret", ba.Name)
		}
	}
}

// serviceAccountToken is a token of the namespace's ServiceAccount sa for audience,
// as a projected volume holds it.
func (f *fixture) serviceAccountToken(sa, audience string) string {
	f.t.Helper()
	err := k8s.Create(f.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: sa}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		f.t.Fatal(err)
	}
	expiry := int64(600)
	tr, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ServiceAccounts(f.ns).CreateToken(f.ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	must(f.t, err)
	return tr.Status.Token
}

// keylessSession is what an application holding the access's Secret and token gets.
type keylessSession struct {
	c s3.Client
	// raw is an SDK client of the same session, for the object lock calls c does not
	// make.
	raw           *awss3.Client
	secretKey     string
	sessionSecret string
}

// assume exchanges token for a session of the role an access's Secret data d names,
// at the STS endpoint it names, reading nothing but d.
func (f *fixture) assume(d map[string][]byte, token string) (keylessSession, error) {
	f.t.Helper()
	client := sts.New(sts.Options{Region: string(d[bkv1.AccessSecretKeyRegion]), BaseEndpoint: aws.String(string(d[bkv1.AccessSecretKeyEndpointSTS])),
		Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 1})
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	out, err := client.AssumeRoleWithWebIdentity(ctx, &sts.AssumeRoleWithWebIdentityInput{
		RoleArn: aws.String(string(d[bkv1.AccessSecretKeyRoleARN])), RoleSessionName: aws.String("app"), WebIdentityToken: aws.String(token)})
	if err != nil {
		return keylessSession{}, err
	}
	c, err := s3.New(f.ctx, s3.Config{
		Endpoint: string(d[bkv1.AccessSecretKeyEndpoint]), Region: string(d[bkv1.AccessSecretKeyRegion]), ForcePathStyle: true,
		AccessKeyID: aws.ToString(out.Credentials.AccessKeyId), SecretAccessKey: aws.ToString(out.Credentials.SecretAccessKey),
		SessionToken: aws.ToString(out.Credentials.SessionToken), RequestTimeout: 10 * time.Second,
	})
	must(f.t, err)
	raw := awss3.New(awss3.Options{
		Region: string(d[bkv1.AccessSecretKeyRegion]), BaseEndpoint: aws.String(string(d[bkv1.AccessSecretKeyEndpoint])), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(aws.ToString(out.Credentials.AccessKeyId), aws.ToString(out.Credentials.SecretAccessKey), aws.ToString(out.Credentials.SessionToken)),
		HTTPClient:  &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second},
	})
	return keylessSession{c: c, raw: raw, secretKey: aws.ToString(out.Credentials.SecretAccessKey), sessionSecret: aws.ToString(out.Credentials.SessionToken)}, nil
}

// refused says whether err is the store refusing (not failing to answer).
func refused(err error) bool {
	if err == nil {
		return false
	}
	if kind := s3.KindOf(err); kind == s3.KindAccessDenied || kind == s3.KindInvalidCredentials {
		return true
	}
	msg := err.Error()
	return containsAny(msg, "AccessDenied", "InvalidIdentityToken", "ExpiredToken", "NoSuchEntity", "StatusCode: 403", "StatusCode: 400")
}

// waitRoleGone waits until role is no longer listed on srv.
func (f *fixture) waitRoleGone(srv *testenv.S3Server, role string) {
	f.t.Helper()
	f.eventually(60*time.Second, "role "+role+" gone from "+string(srv.Kind), func() error {
		if slices.Contains(roleNames(f.t, srv), role) {
			return fmt.Errorf("still listed")
		}
		return nil
	})
}

// waitStoreDistrusts waits until the fixture's store reports WebIdentityReady=False,
// and fails the test unless for reason.
func (f *fixture) waitStoreDistrusts(reason string) {
	f.t.Helper()
	f.waitStoreCondition(bkv1.ConditionWebIdentityReady, metav1.ConditionFalse)
	store := &bkv1.ObjectStore{}
	must(f.t, k8s.Get(f.ctx, types.NamespacedName{Name: f.store}, store))
	if c := findStoreCond(store, bkv1.ConditionWebIdentityReady); c.Reason != reason {
		f.t.Fatalf("WebIdentityReady: %s: %s, want %s", c.Reason, c.Message, reason)
	}
}

// roleNames lists every role on srv.
func roleNames(t *testing.T, srv *testenv.S3Server) []string {
	t.Helper()
	d, err := iam.New(context.Background(), iam.Config{Endpoint: srv.IAMEndpoint, Region: srv.IAMRegion, AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey})
	must(t, err)
	roles, ok := iam.RolesOf(d)
	if !ok {
		t.Fatal("the IAM driver has no role operations")
	}
	names, err := iam.ListRoleNames(context.Background(), roles)
	must(t, err)
	return names
}
