package integration_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestBucketsLiveInTheirRegionOnAWS runs on moto, which refuses, as AWS does, a
// CreateBucket whose LocationConstraint does not match the region it is signed for
// outside us-east-1. A store in eu-west-1 creates a claim's bucket there when the claim
// names no region, in us-east-1 (no LocationConstraint) or ap-northeast-1 when the claim
// names one; each is Ready and configured, and its status names its region.
func TestBucketsLiveInTheirRegionOnAWS(t *testing.T) {
	t.Parallel()
	f := newFixture(t, moto, func(s *bkv1.ObjectStore) { s.Spec.Region = "eu-west-1" })
	cases := map[string]struct{ spec, want, location string }{
		"home":  {"", "eu-west-1", "eu-west-1"},
		"east":  {"us-east-1", "us-east-1", ""}, // AWS answers no constraint for us-east-1
		"tokyo": {"ap-northeast-1", "ap-northeast-1", "ap-northeast-1"},
	}
	sbs := map[string]*bkv1.StorageBucket{}
	for name, tc := range cases {
		sbs[name] = f.bucket(name, func(sb *bkv1.StorageBucket) {
			sb.Spec.Region = tc.spec
			sb.Spec.Tags = map[string]string{"region": tc.want}
			sb.Spec.Versioning = bkv1.VersioningEnabled
		})
	}
	for name, tc := range cases {
		got := f.waitCondition(sbs[name], bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
		if got.Status.Region != tc.want {
			t.Errorf("%s: status.region %q, want %q", name, got.Status.Region, tc.want)
		}
		loc, err := f.server.Client().GetBucketLocation(f.ctx, &awss3.GetBucketLocationInput{Bucket: aws.String(got.Status.BucketName)})
		if err != nil || string(loc.LocationConstraint) != tc.location {
			t.Errorf("%s: bucket %s has LocationConstraint %+v (%v), want %q", name, got.Status.BucketName, loc, err, tc.location)
		}
		tags, err := f.admin.GetBucketTagging(f.ctx, got.Status.BucketName)
		if err != nil || tags["region"] != tc.want {
			t.Errorf("%s: tags %v (%v) not applied", name, tags, err)
		}
	}
}
