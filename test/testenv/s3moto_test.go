package testenv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestMotoAuthorizesAsAWSDocuments pins what testenv corrects in moto (motoMain), so
// that a moto upgrade that changes its tables is noticed here and not as a puzzling
// AccessDenied in a controller test: an identity allowed s3:ListBucket alone may
// HeadBucket, one allowed the public-access block's own actions may read, write and
// delete it, one allowed s3:DeleteObject and s3:DeleteObjectVersion on the bucket's
// objects may DeleteObjects, and a listing whose prefix holds "/" passes the signature
// check. Without
// a policy an identity may do none of these (moto enforces), and moto refuses a
// restart rather than pass one off as an outage, and leaves no process behind.
func TestMotoAuthorizesAsAWSDocuments(t *testing.T) {
	srv, err := testenv.StartS3(testenv.Moto)
	if err != nil {
		t.Fatal(err)
	}
	pid := srv.PID()
	defer func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
		if alive(pid) {
			t.Errorf("moto (pid %d) still runs after Close", pid)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const bucket = "pinned"
	if _, err := srv.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}

	user := func(name, policy string) *s3.Client {
		c := srv.IAMClient()
		if _, err := c.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String(name)}); err != nil {
			t.Fatal(err)
		}
		if policy != "" {
			if _, err := c.PutUserPolicy(ctx, &iam.PutUserPolicyInput{UserName: aws.String(name), PolicyName: aws.String("p"), PolicyDocument: aws.String(policy)}); err != nil {
				t.Fatal(err)
			}
		}
		key, err := c.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		return s3.New(s3.Options{Region: srv.Region, BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(aws.ToString(key.AccessKey.AccessKeyId), aws.ToString(key.AccessKey.SecretAccessKey), "")})
	}
	allow := func(bucketActions, objectActions string) string {
		return `{"Version":"2012-10-17","Statement":[` +
			`{"Effect":"Allow","Action":[` + bucketActions + `],"Resource":"arn:aws:s3:::` + bucket + `"},` +
			`{"Effect":"Allow","Action":[` + objectActions + `],"Resource":"arn:aws:s3:::` + bucket + `/*"}]}`
	}
	granted := user("granted", allow(`"s3:ListBucket","s3:ListBucketVersions","s3:GetBucketPublicAccessBlock","s3:PutBucketPublicAccessBlock"`,
		`"s3:DeleteObject","s3:DeleteObjectVersion"`))
	nothing := user("nothing", "")

	pab := &types.PublicAccessBlockConfiguration{BlockPublicAcls: aws.Bool(true), BlockPublicPolicy: aws.Bool(true),
		IgnorePublicAcls: aws.Bool(true), RestrictPublicBuckets: aws.Bool(true)}
	calls := map[string]func(*s3.Client) error{
		"HeadBucket": func(c *s3.Client) error {
			_, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
			return err
		},
		"PutPublicAccessBlock": func(c *s3.Client) error {
			_, err := c.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: aws.String(bucket), PublicAccessBlockConfiguration: pab})
			return err
		},
		"GetPublicAccessBlock": func(c *s3.Client) error {
			_, err := c.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: aws.String(bucket)})
			return err
		},
		"DeletePublicAccessBlock": func(c *s3.Client) error {
			_, err := c.DeletePublicAccessBlock(ctx, &s3.DeletePublicAccessBlockInput{Bucket: aws.String(bucket)})
			return err
		},
		"ListObjectVersions under a prefix with /": func(c *s3.Client) error {
			_, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(".bucketkeeper/probe/x")})
			return err
		},
		"DeleteObjects of an object and a version": func(c *s3.Client) error {
			out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
				{Key: aws.String("a/b")}, {Key: aws.String("c"), VersionId: aws.String("null")}}}})
			if err == nil && len(out.Errors) > 0 {
				err = &smithy.GenericAPIError{Code: aws.ToString(out.Errors[0].Code), Message: aws.ToString(out.Errors[0].Message)}
			}
			return err
		},
	}
	for _, name := range []string{"HeadBucket", "PutPublicAccessBlock", "GetPublicAccessBlock", "DeletePublicAccessBlock",
		"ListObjectVersions under a prefix with /", "DeleteObjects of an object and a version"} {
		if err := calls[name](granted); err != nil {
			t.Errorf("%s with the actions AWS documents for it: %v", name, err)
		}
		if err := calls[name](nothing); !isCode(err, "AccessDenied", "Forbidden") {
			t.Errorf("%s with no policy: %v, want AccessDenied", name, err)
		}
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err == nil {
		t.Error("moto started again after Stop; its state is gone, so a restart is no outage")
	}
}

// isCode reports whether err is an API error with one of codes (a HEAD answer has no
// body, so its code is the HTTP status text).
func isCode(err error, codes ...string) bool {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	for _, c := range codes {
		if apiErr.ErrorCode() == c {
			return true
		}
	}
	return false
}
