package mover_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestMoveToAnotherRegionOnMoto moves a bucket onto moto, the AWS stand-in, into a
// bucket of eu-west-1 while the store's own region is us-east-1: what only AWS does.
// The objects arrive with their bytes, metadata and tags, the multipart one in the
// source's parts, and every request the mover sent the target was signed for the
// target bucket's region (Bucket.Region). AWS refuses a signature for another region
// (AuthorizationHeaderMalformed); moto does not, so a proxy reads each request's
// credential scope.
func TestMoveToAnotherRegionOnMoto(t *testing.T) {
	moto := testenv.NewS3(t, testenv.Moto)
	ctx := context.Background()
	src := newBucket(t, seaweed, false)
	tgt := side{srv: moto, bucket: "mv-west-" + randomHex(6), c: moto.Client()}
	_, err := tgt.c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(tgt.bucket),
		CreateBucketConfiguration: &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraintEuWest1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tgt.destroy(context.Background()) })
	objs := mixedObjects("west", 40, []object{{key: "big/11mib.bin", size: 11 << 20, partSize: 5 << 20, tags: map[string]string{"r": "eu"}}})
	src.putAll(t, objs)

	f := newMove(t, src, tgt, mover.VersionsCurrent)
	proxy := newCountingProxy(t, moto.Endpoint)
	f.spec.Target.Endpoint, f.spec.Target.Region = proxy.URL, "eu-west-1"
	p := f.run(mover.ModeFinal, 1)
	if !p.Verified || p.Failures.Count != 0 {
		t.Fatalf("move into eu-west-1: verified %v, failures %s, differences %s", p.Verified, p.Failures, p.Differences)
	}
	if scopes := proxy.signedRegions(); len(scopes) != 1 || scopes["eu-west-1"] == 0 {
		t.Errorf("requests to the target signed for %v, want eu-west-1 only", scopes)
	}
	expectObjects(t, tgt, objs)
}
