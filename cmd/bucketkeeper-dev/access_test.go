package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// sampleKey is one sample's access Secret, read through the dev kubeconfig.
type sampleKey struct {
	sample string // namespace/name
	bucket string // BUCKET_NAME
	client *s3.Client
}

// assertSampleKeysScoped is what a person tries after `make dev`: each sample's
// Secret <name>-access alone (endpoint, region, key) lets a plain aws-sdk-go-v2
// client write and read its own bucket, and the other samples' buckets answer it
// 403 AccessDenied, for reads and for writes. The caller has seen the readiness
// line, which comes only once every sample's key is in its Secret.
func assertSampleKeysScoped(t *testing.T, kubeconfig string, samples map[string]string) {
	t.Helper()
	if len(samples) < 2 {
		t.Fatalf("need two samples with access to compare, have %v", samples)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	names, secrets := sampleSecrets(ctx, t, kubeconfig, samples)
	keys := make([]sampleKey, 0, len(names))
	for _, name := range names {
		secret := secrets[name]
		k := sampleKey{sample: name, bucket: string(secret.Data[bkv1.AccessSecretKeyBucketName]), client: clientFromSecret(t, secret)}
		if k.bucket != samples[name] {
			t.Errorf("%s: Secret's %s = %q, the table shows bucket %q", name, bkv1.AccessSecretKeyBucketName, k.bucket, samples[name])
		}
		keys = append(keys, k)
	}

	object := "written-with-its-own-key"
	for _, k := range keys {
		body := []byte("from " + k.sample)
		if _, err := k.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(k.bucket), Key: aws.String(object), Body: bytes.NewReader(body)}); err != nil {
			t.Errorf("%s: put to its own bucket %s: %v", k.sample, k.bucket, err)
			continue
		}
		out, err := k.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(k.bucket), Key: aws.String(object)})
		if err != nil {
			t.Errorf("%s: get from its own bucket %s: %v", k.sample, k.bucket, err)
			continue
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("%s: read back %q, %v; want %q", k.sample, got, err, body)
		}
	}
	for _, k := range keys {
		for _, other := range keys {
			if other.sample == k.sample {
				continue
			}
			_, err := k.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(other.bucket), Key: aws.String("intruder"), Body: strings.NewReader("x")})
			assertAccessDenied(t, k.sample+": put to "+other.sample+"'s bucket "+other.bucket, err)
			_, err = k.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(other.bucket), Key: aws.String(object)})
			assertAccessDenied(t, k.sample+": get from "+other.sample+"'s bucket "+other.bucket, err)
		}
	}
}

// clientFromSecret builds an S3 client from the Secret's values alone, with no
// shared config or environment lookups. Path-style addressing is the client's
// choice for an IP-address endpoint (the aws CLI makes it by itself).
func clientFromSecret(t *testing.T, secret *corev1.Secret) *s3.Client {
	t.Helper()
	v := func(k string) string {
		if len(secret.Data[k]) == 0 {
			t.Fatalf("Secret %s/%s has no %s", secret.Namespace, secret.Name, k)
		}
		return string(secret.Data[k])
	}
	return s3.New(s3.Options{
		Region:       v(bkv1.AccessSecretKeyRegion),
		BaseEndpoint: aws.String(v(bkv1.AccessSecretKeyEndpoint)),
		Credentials:  credentials.NewStaticCredentialsProvider(v(bkv1.AccessSecretKeyAccessKeyID), v(bkv1.AccessSecretKeySecretKey), ""),
		UsePathStyle: true,
		HTTPClient:   &http.Client{Timeout: 10 * time.Second},
	})
}

// assertAccessDenied: err is the store's 403 with code AccessDenied.
func assertAccessDenied(t *testing.T, what string, err error) {
	t.Helper()
	var status *awshttp.ResponseError
	var api smithy.APIError
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want 403 AccessDenied", what)
	case !errors.As(err, &status) || status.HTTPStatusCode() != http.StatusForbidden:
		t.Errorf("%s: %v, want HTTP 403", what, err)
	case !errors.As(err, &api) || api.ErrorCode() != "AccessDenied":
		t.Errorf("%s: %v, want AccessDenied", what, err)
	}
}

// assertAWSCLIWithTheSecret runs the README's recipe with the aws CLI users have
// (Debian's awscli v2, testenv.AWSCLIRecipe), given nothing but one sample's access
// Secret as environment: an upload and a listing of its bucket, in both of the README's
// forms, and a listing of another sample's bucket refused AccessDenied.
func assertAWSCLIWithTheSecret(t *testing.T, kubeconfig string, samples map[string]string) {
	t.Helper()
	// Five runs of the CLI, a Python program that takes many seconds to start on a
	// loaded machine: the deadline bounds a hang, not the CLI's speed.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	names, secrets := sampleSecrets(ctx, t, kubeconfig, samples)
	own, other := names[0], names[1]
	data := secrets[own].Data
	endpoint, bucket := string(data[bkv1.AccessSecretKeyEndpoint]), string(data[bkv1.AccessSecretKeyBucketName])
	if err := testenv.AWSCLIRecipe(ctx, t.TempDir(), data, endpoint, bucket, samples[other]); err != nil {
		t.Fatalf("%s's Secret: %v", own, err)
	}
}

// sampleSecrets reads, through the dev kubeconfig, each sample's access Secret
// <name>-access, and returns the samples' names sorted.
func sampleSecrets(ctx context.Context, t *testing.T, kubeconfig string, samples map[string]string) ([]string, map[string]*corev1.Secret) {
	t.Helper()
	kube := kubeconfigClient(t, kubeconfig)
	names := make([]string, 0, len(samples))
	for k := range samples {
		names = append(names, k)
	}
	sort.Strings(names)
	secrets := make(map[string]*corev1.Secret, len(names))
	for _, name := range names {
		ns, n, _ := strings.Cut(name, "/")
		secret := &corev1.Secret{}
		if err := kube.Get(ctx, types.NamespacedName{Namespace: ns, Name: n + "-access"}, secret); err != nil {
			t.Fatalf("%s: access Secret: %v", name, err)
		}
		secrets[name] = secret
	}
	return names, secrets
}
