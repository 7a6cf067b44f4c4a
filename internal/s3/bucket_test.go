package s3

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestRegionsAsAWSAnswersThem pins, on moto (the AWS stand-in, signatures checked),
// what only AWS does with regions and what CreateBucket and HeadBucket make of it:
//   - in us-east-1, creating a bucket one already owns answers 200, not
//     BucketAlreadyOwnedByYou: there, "created" cannot tell a new bucket from an
//     owned one, which is why the operator tags before it trusts a creation;
//   - in any other region the same request is 409 BucketAlreadyOwnedByYou;
//   - a bucket created for a region has that LocationConstraint, and HeadBucket
//     reports its region (x-amz-bucket-region) to a client of another region, which
//     is how the operator learns where to sign.
func TestRegionsAsAWSAnswersThem(t *testing.T) {
	srv := testenv.NewS3(t, testenv.Moto)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clientWith := func(region, secret string) Client {
		c, err := New(ctx, Config{Endpoint: srv.Endpoint, Region: region, ForcePathStyle: true,
			AccessKeyID: srv.AccessKeyID, SecretAccessKey: secret, RequestTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	east, west := clientWith("us-east-1", srv.SecretAccessKey), clientWith("eu-west-1", srv.SecretAccessKey)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	suffix := hex.EncodeToString(b) // the server is the test's own; unique anyway
	eastBucket, westBucket := "bk-east-"+suffix, "bk-west-"+suffix

	if err := east.CreateBucket(ctx, eastBucket, "us-east-1"); err != nil {
		t.Fatalf("create in us-east-1: %v", err)
	}
	if err := east.CreateBucket(ctx, eastBucket, "us-east-1"); err != nil {
		t.Fatalf("create again in us-east-1: %v (%s), want 200 as AWS answers there", err, KindOf(err))
	}
	if err := west.CreateBucket(ctx, westBucket, "eu-west-1"); err != nil {
		t.Fatalf("create in eu-west-1: %v", err)
	}
	if err := west.CreateBucket(ctx, westBucket, "eu-west-1"); KindOf(err) != KindAlreadyOwnedByYou {
		t.Fatalf("create again in eu-west-1: %v (%s), want BucketAlreadyOwnedByYou", err, KindOf(err))
	}

	// The stand-in checks signatures, as AWS does: a wrong secret creates nothing.
	forged := clientWith("us-east-1", srv.SecretAccessKey+"x")
	if err := forged.CreateBucket(ctx, "bk-forged-"+suffix, "us-east-1"); KindOf(err) != KindInvalidCredentials {
		t.Fatalf("create with a wrong secret: %v (%s), want invalid credentials (SignatureDoesNotMatch)", err, KindOf(err))
	}
	if _, err := east.HeadBucket(ctx, "bk-forged-"+suffix); KindOf(err) != KindNotFound {
		t.Fatalf("the bucket of the forged request: %v (%s), want not found", err, KindOf(err))
	}

	loc, err := srv.Client().GetBucketLocation(ctx, &awss3.GetBucketLocationInput{Bucket: aws.String(westBucket)})
	if err != nil || loc.LocationConstraint != "eu-west-1" {
		t.Fatalf("LocationConstraint of %s: %+v, %v; want eu-west-1", westBucket, loc, err)
	}
	for bucket, want := range map[string]string{eastBucket: "us-east-1", westBucket: "eu-west-1"} {
		region, err := east.HeadBucket(ctx, bucket)
		if err != nil || region != want {
			t.Fatalf("HeadBucket(%s) from a us-east-1 client: region %q, %v; want %q", bucket, region, err, want)
		}
	}
}
