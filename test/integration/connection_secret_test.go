package integration_test

import (
	"bytes"
	"encoding/pem"
	"maps"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestConnectionSecretReachesPrivateStore: a store behind TLS with a private CA
// (spec.caBundle) and path-style addressing. The connection Secret carries the CA and
// the addressing style, and an application that has only the Secret's data reads and
// writes its bucket over verified TLS.
func TestConnectionSecretReachesPrivateStore(t *testing.T) {
	// A TLS front for SeaweedFS whose certificate only the given CA vouches for: the
	// system roots do not trust it, so connecting proves the CA bundle is used.
	backend, err := url.Parse(seaweed.Endpoint)
	must(t, err)
	front := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(backend))
	t.Cleanup(front.Close)
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw}))

	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) {
		s.Spec.Endpoint = front.URL
		s.Spec.CABundle = caPEM
		s.Spec.ApplicationCredentialsSecretRef = &bkv1.SecretReference{Namespace: s.Spec.CredentialsSecretRef.Namespace, Name: "app-credentials"}
	})
	must(t, k8s.Create(f.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app-credentials"},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: seaweed.AccessKeyID, bkv1.CredentialsKeySecretAccessKey: seaweed.SecretAccessKey},
	}))
	sb := f.bucket("private")
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)

	secret := &corev1.Secret{}
	must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "private-bucket"}, secret))
	d := secret.Data
	if string(d[bkv1.SecretKeyCABundle]) != caPEM {
		t.Fatalf("%s = %q, want the store's caBundle", bkv1.SecretKeyCABundle, d[bkv1.SecretKeyCABundle])
	}
	if string(d[bkv1.SecretKeyForcePathStyle]) != "true" {
		t.Fatalf("%s = %q, want true", bkv1.SecretKeyForcePathStyle, d[bkv1.SecretKeyForcePathStyle])
	}

	// The application: nothing but the Secret.
	app, err := s3.New(f.ctx, s3.Config{
		Endpoint:        string(d[bkv1.SecretKeyAWSEndpointS3]),
		Region:          string(d[bkv1.SecretKeyAWSRegion]),
		ForcePathStyle:  string(d[bkv1.SecretKeyForcePathStyle]) == "true",
		CABundle:        d[bkv1.SecretKeyCABundle],
		AccessKeyID:     string(d[bkv1.SecretKeyAWSAccessKeyID]),
		SecretAccessKey: string(d[bkv1.SecretKeyAWSSecretKey]),
	})
	must(t, err)
	bucket := string(d[bkv1.SecretKeyBucketName])
	body := []byte("written through the connection Secret alone")
	must(t, app.PutObject(f.ctx, bucket, "app/hello.txt", body))
	got, err := app.GetObject(f.ctx, bucket, "app/hello.txt", 1024)
	must(t, err)
	if !bytes.Equal(got, body) {
		t.Fatalf("read back %q", got)
	}
	must(t, app.DeleteObject(f.ctx, bucket, "app/hello.txt"))

	// Without the CA the same client is refused: the bundle is what makes it work.
	bare, err := s3.New(f.ctx, s3.Config{Endpoint: front.URL, Region: string(d[bkv1.SecretKeyAWSRegion]), ForcePathStyle: true,
		AccessKeyID: seaweed.AccessKeyID, SecretAccessKey: seaweed.SecretAccessKey})
	must(t, err)
	if _, err := bare.GetObject(f.ctx, bucket, "app/hello.txt", 1024); s3.KindOf(err) != s3.KindTLS {
		t.Fatalf("without the CA bundle: %v, want a TLS error", err)
	}

	// A store with neither: virtual-hosted style is said explicitly, no CA key.
	f.updateStore(func(s *bkv1.ObjectStoreSpec) {
		s.CABundle = ""
		s.InsecureSkipTLSVerify = true
	})
	f.eventually(time.Minute, "the connection Secret to drop the CA bundle", func() error {
		s := &corev1.Secret{}
		if err := k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "private-bucket"}, s); err != nil {
			return err
		}
		if _, ok := s.Data[bkv1.SecretKeyCABundle]; ok {
			return errf("still has %s", bkv1.SecretKeyCABundle)
		}
		return nil
	})
}

// TestTamperedConnectionSecretIsRestored: the cache keeps connection Secrets as metadata
// and a digest of their data. A change of the data on the server, even one that also
// writes a "digest" label of the original data, is seen and undone, and the label,
// which belongs to the cache alone, never stays on the server.
func TestTamperedConnectionSecretIsRestored(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := f.bucket("tampered")
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	key := types.NamespacedName{Namespace: f.ns, Name: sb.Name + "-bucket"}
	secret := &corev1.Secret{}
	must(t, k8s.Get(f.ctx, key, secret))
	original := maps.Clone(secret.Data)

	secret.Data[bkv1.SecretKeyBucketName] = []byte("someone-elses-bucket")
	secret.Labels[bkv1.LabelCachedDataDigest] = reconcile.ConnectionDataDigest(original)
	must(t, k8s.Update(f.ctx, secret))
	f.eventually(30*time.Second, "the connection Secret restored", func() error {
		got := &corev1.Secret{}
		if err := k8s.Get(f.ctx, key, got); err != nil {
			return err
		}
		if !maps.EqualFunc(got.Data, original, bytes.Equal) {
			return errf("%s = %q", bkv1.SecretKeyBucketName, got.Data[bkv1.SecretKeyBucketName])
		}
		if _, ok := got.Labels[bkv1.LabelCachedDataDigest]; ok {
			return errf("the cache's digest label is on the server: %v", got.Labels)
		}
		return nil
	})
}

// TestLongNamesGetValidLabels: a StorageBucket may be named with up to 240 characters,
// a label value only 63. The connection Secret is labelled with a hash of the long name
// (naming.LabelValue) and the claim becomes Ready; a second long name sharing the first
// 63 characters gets a Secret of its own.
func TestLongNamesGetValidLabels(t *testing.T) {
	f := newFixture(t, seaweed)
	stem := strings.Repeat("long-name-", 10)
	first, second := f.bucket(stem+"first"), f.bucket(stem+"second")
	for _, sb := range []*bkv1.StorageBucket{first, second} {
		got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, "")
		secret := &corev1.Secret{}
		must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: got.Status.ConnectionSecretName}, secret))
		if v := secret.Labels[bkv1.LabelStorageBucket]; v != naming.LabelValue(sb.Name) || len(v) > 63 {
			t.Errorf("%s: connection Secret labelled %q", sb.Name, v)
		}
	}
	if naming.LabelValue(first.Name) == naming.LabelValue(second.Name) {
		t.Error("two long names share a label value")
	}
}
