package main

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestVet: what env takes from a Secret. Only the keys the operator writes there, each
// plain text, with the endpoint, host, port and CA bundle of the store the bucket lives
// on; a store the user may not read, or that is not known, is refused unless
// --skip-endpoint-check, which never lets a readable store's other endpoint through.
func TestVet(t *testing.T) {
	const endpoint = "http://127.0.0.1:9000"
	pem := "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	access := func(mutate func(map[string][]byte)) map[string][]byte {
		d := map[string][]byte{
			bkv1.AccessSecretKeyAccessKeyID: []byte("AKID"), bkv1.AccessSecretKeySecretKey: []byte("s3cr3t"),
			bkv1.AccessSecretKeyRegion: []byte("us-east-1"), bkv1.AccessSecretKeyEndpoint: []byte(endpoint),
			bkv1.AccessSecretKeyBucketName: []byte("team-a-photos"), bkv1.AccessSecretKeyBucketNames: []byte("photos=team-a-photos"),
			bkv1.SecretKeyForcePathStyle: []byte("true"),
		}
		if mutate != nil {
			mutate(d)
		}
		return d
	}
	connection := func(mutate func(map[string][]byte)) map[string][]byte {
		d := map[string][]byte{
			bkv1.SecretKeyBucketName: []byte("team-a-photos"), bkv1.SecretKeyBucketRegion: []byte("us-east-1"),
			bkv1.SecretKeyBucketEndpoint: []byte(endpoint), bkv1.SecretKeyBucketHost: []byte("127.0.0.1"), bkv1.SecretKeyBucketPort: []byte("9000"),
			bkv1.SecretKeyAWSRegion: []byte("us-east-1"), bkv1.SecretKeyAWSEndpointS3: []byte(endpoint), bkv1.SecretKeyForcePathStyle: []byte("true"),
			bkv1.SecretKeyAWSAccessKeyID: []byte("AKID"), bkv1.SecretKeyAWSSecretKey: []byte("s3cr3t"),
		}
		if mutate != nil {
			mutate(d)
		}
		return d
	}
	set := func(k, v string) func(map[string][]byte) { return func(d map[string][]byte) { d[k] = []byte(v) } }
	stores := []client.Object{
		&bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Spec: bkv1.ObjectStoreSpec{Endpoint: endpoint}},
		&bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "private-ca"}, Spec: bkv1.ObjectStoreSpec{Endpoint: endpoint, CABundle: pem}},
		&bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "aws"}, Spec: bkv1.ObjectStoreSpec{Region: "eu-west-1"}},
		&bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "forbidden"}, Spec: bkv1.ObjectStoreSpec{Endpoint: endpoint}},
	}
	c := fake.NewClientBuilder().WithScheme(mustScheme(t)).WithObjects(stores...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if key.Name == "forbidden" {
				return apierrors.NewForbidden(schema.GroupResource{Group: bkv1.GroupVersion.Group, Resource: "objectstores"}, key.Name, nil)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	awsData := access(func(d map[string][]byte) {
		d[bkv1.AccessSecretKeyEndpoint] = []byte("https://s3.eu-west-1.amazonaws.com")
		d[bkv1.AccessSecretKeyRegion] = []byte("eu-west-1")
	})
	for _, tc := range []struct {
		name   string
		store  string
		listed []string
		data   map[string][]byte
		skip   bool
		// err is what the refusal says; "" when the Secret is used.
		err string
		// stderr is what the warning says, if any.
		stderr string
	}{
		{name: "an access's Secret as written", store: "local", listed: bkv1.AccessSecretKeys, data: access(nil)},
		{name: "a connection Secret as written", store: "local", listed: bkv1.ConnectionSecretKeys, data: connection(nil)},
		{name: "with the store's CA bundle", store: "private-ca", listed: bkv1.AccessSecretKeys, data: access(set(bkv1.SecretKeyCABundle, pem))},
		{name: "on AWS", store: "aws", listed: bkv1.AccessSecretKeys, data: awsData},
		{name: "the tenant's variables", store: "local", listed: bkv1.AccessSecretKeys,
			data: access(func(d map[string][]byte) {
				for _, k := range append(hostileNames, "PATH", "AWS_ENDPOINT_URL", "AWS_CONFIG_FILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ENDPOINT_URL_STS", "BUCKET_HOST") {
					d[k] = []byte("$(touch /tmp/pwned)")
				}
			}),
			stderr: "holds keys bucketkeeper does not write there; they are left out: AWS_CONFIG_FILE, AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_STS, AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE, BASH_ENV, BUCKET_HOST, ENV, LD_PRELOAD, PATH, PROMPT_COMMAND, PS4, SHELLOPTS"},
		{name: "the tenant's endpoint", store: "local", listed: bkv1.AccessSecretKeys, data: access(set(bkv1.AccessSecretKeyEndpoint, "http://tenant.example:9000")),
			err: `its AWS_ENDPOINT_URL_S3 "http://tenant.example:9000" is not the endpoint of ObjectStore local, http://127.0.0.1:9000`},
		{name: "the tenant's endpoint, skip asked", store: "local", listed: bkv1.AccessSecretKeys, data: access(set(bkv1.AccessSecretKeyEndpoint, "http://tenant.example:9000")), skip: true,
			err: "is not the endpoint of ObjectStore local"},
		{name: "no endpoint", store: "local", listed: bkv1.AccessSecretKeys, data: access(func(d map[string][]byte) { delete(d, bkv1.AccessSecretKeyEndpoint) }),
			err: "it holds no AWS_ENDPOINT_URL_S3"},
		{name: "the tenant's host", store: "local", listed: bkv1.ConnectionSecretKeys, data: connection(set(bkv1.SecretKeyBucketHost, "tenant.example")),
			err: `its BUCKET_HOST "tenant.example" is not that of ObjectStore local's endpoint`},
		{name: "the tenant's BUCKET_ENDPOINT", store: "local", listed: bkv1.ConnectionSecretKeys, data: connection(set(bkv1.SecretKeyBucketEndpoint, "http://tenant.example")),
			err: `its BUCKET_ENDPOINT "http://tenant.example" is not that of ObjectStore local's endpoint`},
		{name: "the tenant's port", store: "local", listed: bkv1.ConnectionSecretKeys, data: connection(set(bkv1.SecretKeyBucketPort, "9001")),
			err: `its BUCKET_PORT "9001"`},
		{name: "the tenant's CA", store: "local", listed: bkv1.AccessSecretKeys, data: access(set(bkv1.SecretKeyCABundle, pem)),
			err: "its BUCKET_CA_BUNDLE is not ObjectStore local's spec.caBundle"},
		{name: "another CA than the store's", store: "private-ca", listed: bkv1.AccessSecretKeys, data: access(set(bkv1.SecretKeyCABundle, pem+pem)),
			err: "its BUCKET_CA_BUNDLE is not ObjectStore private-ca's spec.caBundle"},
		{name: "the store's CA taken out", store: "private-ca", listed: bkv1.AccessSecretKeys, data: access(nil),
			err: "its BUCKET_CA_BUNDLE is not ObjectStore private-ca's spec.caBundle"},
		{name: "a host that is not AWS's", store: "aws", listed: bkv1.AccessSecretKeys, data: access(set(bkv1.AccessSecretKeyEndpoint, "https://s3.eu-west-1.amazonaws.com.tenant.example")),
			err: "is not S3's endpoint on AWS"},
		{name: "a path on AWS", store: "aws", listed: bkv1.AccessSecretKeys, data: access(set(bkv1.AccessSecretKeyEndpoint, "https://s3.eu-west-1.amazonaws.com/@tenant.example")),
			err: "is not S3's endpoint on AWS"},
		{name: "an escape sequence", store: "local", listed: bkv1.AccessSecretKeys, data: access(set(bkv1.AccessSecretKeyBucketName, "b\x1b]52;c;cm0gLXJmIH4K\a")),
			err: "its BUCKET_NAME holds the control character U+001B"},
		{name: "a NUL", store: "local", listed: bkv1.AccessSecretKeys, data: access(set(bkv1.AccessSecretKeyAccessKeyID, "AK\x00ID")),
			err: "its AWS_ACCESS_KEY_ID holds the control character U+0000"},
		{name: "a C1 control", store: "local", listed: bkv1.AccessSecretKeys, data: access(set(bkv1.AccessSecretKeyRegion, "us\u009b31m")),
			err: "its AWS_REGION holds the control character U+009B"},
		{name: "not UTF-8", store: "local", listed: bkv1.AccessSecretKeys, data: access(set(bkv1.AccessSecretKeyRegion, "us\x9b31m")),
			err: "its AWS_REGION is not UTF-8 text"},
		{name: "a store the user may not read", store: "forbidden", listed: bkv1.AccessSecretKeys, data: access(nil),
			err: "you cannot read ObjectStore forbidden to compare its endpoint, and anyone who may write Secrets in namespace team-a can change it, so it is not used. Check the endpoint yourself (kubectl bucketkeeper env without a command lists it), then pass --skip-endpoint-check"},
		{name: "a store the user may not read, skip asked", store: "forbidden", listed: bkv1.AccessSecretKeys, data: access(nil), skip: true,
			stderr: `you cannot read ObjectStore forbidden to compare its endpoint; its AWS_ENDPOINT_URL_S3 "http://127.0.0.1:9000" is used as it is, not checked (--skip-endpoint-check)`},
		{name: "a store that does not exist", store: "gone", listed: bkv1.AccessSecretKeys, data: access(nil),
			err: "ObjectStore gone, whose endpoint it must name, does not exist"},
		{name: "no store known", store: "", listed: bkv1.AccessSecretKeys, data: access(nil),
			err: "which ObjectStore the bucket lives on is not known yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errOut bytes.Buffer
			o := &envOptions{options: &options{streams: genericiooptions.IOStreams{ErrOut: &errOut}}, skipEndpointCheck: tc.skip}
			s := &envSecret{Secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "photos-access"}, Data: tc.data}, listed: tc.listed, store: tc.store}
			got, err := o.vet(context.Background(), c, s)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("got %v, want an error saying %q", err, tc.err)
			case tc.err != "" && strings.Contains(err.Error(), "s3cr3t"):
				t.Errorf("the refusal holds the secret key: %v", err)
			case tc.err == "":
				for k, v := range got {
					if !slices.Contains(tc.listed, k) || !bytes.Equal(v, tc.data[k]) {
						t.Errorf("vet passed on %s=%q", k, v)
					}
				}
				if want := len(tc.data) - len(bkv1.UnlistedSecretKeys(tc.data, tc.listed)); len(got) != want {
					t.Errorf("vet passed on %d keys, want the %d listed ones: %v", len(got), want, slices.Sorted(maps.Keys(got)))
				}
			}
			if !strings.Contains(errOut.String(), tc.stderr) || tc.stderr == "" && errOut.Len() > 0 {
				t.Errorf("stderr %q, want %q", errOut.String(), tc.stderr)
			}
		})
	}
}

// TestListingQuotesValues: env's listing prints a plain value as it is and any other
// quoted as for a shell, so a newline or a quote in a value cannot pass for another
// line or variable.
func TestListingQuotesValues(t *testing.T) {
	var out, errOut bytes.Buffer
	o := &envOptions{options: &options{streams: genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}}}
	must(t, o.listVariables(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "photos-access"}}, map[string][]byte{
		bkv1.SecretKeyBucketName:        []byte("team-a-photos"),
		bkv1.SecretKeyAWSEndpointS3:     []byte("https://s3.example.test:9000"),
		bkv1.AccessSecretKeyBucketNames: []byte("photos=team-a-photos,logs=it's\nAWS_SECRET_ACCESS_KEY=x"),
		bkv1.SecretKeyAWSSecretKey:      []byte("s3cr3t"),
	}))
	want := "AWS_ENDPOINT_URL_S3=https://s3.example.test:9000\n" +
		"AWS_SECRET_ACCESS_KEY=(hidden, 6 bytes)\n" +
		"BUCKET_NAME=team-a-photos\n" +
		"BUCKET_NAMES='photos=team-a-photos,logs=it'\\''s\nAWS_SECRET_ACCESS_KEY=x'\n"
	if out.String() != want {
		t.Errorf("listing:\n%s\nwant:\n%s", out.String(), want)
	}
}

func mustScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s, err := scheme()
	must(t, err)
	return s
}
