package e2e_test

import (
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestSamplesWorkOnTheirStores applies every sample of config/samples as it is, to a
// cluster of its own with the operator, each store sample pointed at the kind of store
// it describes (local: a Versity S3 Gateway with its IAM service, as `make dev` runs;
// shared: SeaweedFS with IAM on its S3 port) with its credentials Secret's keys filled
// in, and waits for every object to be Current. Then what each sample says it does:
// the configured claim's policy and ReadWrite probe agree (Available) and its
// lifecycle rules are on the bucket; the access's key writes its ReadWrite bucket,
// reads its ReadOnly one and may not write there.
func TestSamplesWorkOnTheirStores(t *testing.T) {
	w := newWalk(t, operator.Options{})
	w.store("local", versity)
	w.store("shared", seaweed)
	objs := readSamples(t, map[string]string{
		"http://127.0.0.1:7070": versity.Endpoint,
		"http://127.0.0.1:7071": versity.IAMEndpoint,
		"http://127.0.0.1:8333": seaweed.Endpoint,
	})
	for _, o := range objs {
		if o.GetKind() != "Secret" {
			continue
		}
		srv := map[string]string{"local-store-credentials": "local", "shared-store-credentials": "shared"}[o.GetName()]
		if srv == "" {
			t.Fatalf("a sample Secret the test does not know: %s", o.GetName())
		}
		keys := map[string][2]string{"local": {versity.AccessKeyID, versity.SecretAccessKey}, "shared": {seaweed.AccessKeyID, seaweed.SecretAccessKey}}[srv]
		data := o.Object["stringData"].(map[string]any)
		if data[bkv1.CredentialsKeyAccessKeyID] != "REPLACE-WITH-THE-STORE-ACCESS-KEY-ID" || data[bkv1.CredentialsKeySecretAccessKey] != "REPLACE-WITH-THE-STORE-SECRET-ACCESS-KEY" {
			t.Fatalf("Secret %s: stringData %v, want the keys %s and %s with placeholders", o.GetName(), data, bkv1.CredentialsKeyAccessKeyID, bkv1.CredentialsKeySecretAccessKey)
		}
		data[bkv1.CredentialsKeyAccessKeyID], data[bkv1.CredentialsKeySecretAccessKey] = keys[0], keys[1]
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	if kinds["ObjectStore"] < 2 || kinds["StorageBucket"] < 3 || kinds["BucketAccess"] < 1 || kinds["Secret"] < 2 {
		t.Fatalf("samples of kinds %v: want both stores with their Secrets, the claims and the access", kinds)
	}
	w.apply(objs)
	w.waitCurrent(objs, 3*time.Minute)

	// The configured claim: its policy lets its ReadWrite probe through, and its
	// lifecycle rules are on the bucket.
	reports := w.storageBucket("default", "reports")
	var probed *bkv1.StorageBucket
	must(t, pollFor(w, 2*time.Minute, func() error {
		probed = w.storageBucket("default", "reports")
		if !apimeta.IsStatusConditionTrue(probed.Status.Conditions, bkv1.ConditionAvailable) {
			return errorf("reports not Available: %s", testenv.DescribeConditions(probed.Status.Conditions))
		}
		return nil
	}))
	rules, err := w.stores["shared"].GetBucketLifecycle(w.ctx, reports.Status.BucketName)
	must(t, err)
	if len(rules) != 2 {
		t.Errorf("lifecycle rules on %s: %v, want the sample's two", reports.Status.BucketName, rules)
	}

	// The access: its key writes reports, reads archive, may not write archive.
	key := w.keyClient(w.secret("default", "reports-app-s3"))
	archive := w.storageBucket("default", "archive").Status.BucketName
	must(t, key.PutObject(w.ctx, reports.Status.BucketName, "tmp/sample.txt", []byte("written with the access's key")))
	if _, err := key.GetObject(w.ctx, reports.Status.BucketName, "tmp/sample.txt", 1024); err != nil {
		t.Errorf("read back with the access's key: %v", err)
	}
	if _, err := key.HeadBucket(w.ctx, archive); err != nil {
		t.Errorf("the ReadOnly grant does not reach %s: %v", archive, err)
	}
	if err := key.PutObject(w.ctx, archive, "x", []byte("x")); !isDenied(err) {
		t.Errorf("a write with the ReadOnly grant to %s: %v, want AccessDenied", archive, err)
	}
}
