package awspolicy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
)

// TestRecorderReadsTheRequestsSent: the recorder, a middleware of real SDK clients,
// records each request's service, operation and conditions as the SDK sends them
// (to a server that answers every request 200).
func TestRecorderReadsTheRequestsSent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	rec := &Recorder{}
	opts := []func(*middleware.Stack) error{rec.Middleware}
	creds := credentials.NewStaticCredentialsProvider("AK", "SK", "")
	s3c := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true, Credentials: creds,
		Retryer: aws.NopRetryer{}, APIOptions: opts})
	iamc := awsiam.New(awsiam.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: creds,
		Retryer: aws.NopRetryer{}, APIOptions: opts})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, k := aws.String("team-data"), aws.String("k")
	// Answers that do not parse do not matter: the request was sent.
	_, _ = s3c.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: b, Key: k, VersionId: aws.String("v1")})
	_, _ = s3c.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: b, Key: k})
	_, _ = s3c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: k, Body: strings.NewReader("x"), Tagging: aws.String("a=b"),
		ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: aws.Time(time.Now().Add(time.Hour)),
		ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
	_, _ = s3c.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: b, BypassGovernanceRetention: aws.Bool(true),
		Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: k, VersionId: aws.String("v1")}, {Key: k}}}})
	_, _ = s3c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: b, ObjectLockEnabledForBucket: aws.Bool(true)})
	_, _ = s3c.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: b})
	_, _ = s3c.PutBucketTagging(ctx, &awss3.PutBucketTaggingInput{Bucket: b, Tagging: &types.Tagging{TagSet: []types.Tag{{Key: k, Value: k}}}})
	_, _ = iamc.CreateRole(ctx, &awsiam.CreateRoleInput{RoleName: aws.String("bk-x"), AssumeRolePolicyDocument: aws.String("{}")})

	var got []string
	for _, r := range rec.Requests() {
		got = append(got, r.String())
	}
	want := []string{
		"iam CreateRole",
		"s3 CreateBucket (with object lock)",
		"s3 DeleteObjects (without a version, of a version, bypassing governance retention)",
		"s3 GetObjectTagging (of a version)",
		"s3 GetObjectTagging (without a version)",
		"s3 HeadBucket",
		"s3 PutBucketTagging",
		"s3 PutObject (with tags, with a retention, with a legal hold)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("recorded\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if m := rec.Missing(); len(m) > 0 {
		t.Errorf("the list lacks actions these requests need: %v", m)
	}
}

// TestActionsOfARequest: a request needs the action of its operation, the version's
// where it names one, and one more per tag, lock or bypass it carries.
func TestActionsOfARequest(t *testing.T) {
	for _, tc := range []struct {
		req  Request
		want []string
	}{
		{Request{"s3", "GetObjectTagging", []Condition{Versioned}}, []string{"s3:GetObjectVersionTagging"}},
		{Request{"s3", "GetObjectTagging", []Condition{Unversioned}}, []string{"s3:GetObjectTagging"}},
		{Request{"s3", "GetObjectRetention", []Condition{Versioned}}, []string{"s3:GetObjectRetention"}},
		{Request{"s3", "PutObject", []Condition{Tagged, Retention, LegalHold}},
			[]string{"s3:PutObject", "s3:PutObjectTagging", "s3:PutObjectRetention", "s3:PutObjectLegalHold"}},
		{Request{"s3", "DeleteObjects", []Condition{Unversioned, Versioned, BypassGovernance}},
			[]string{"s3:DeleteObject", "s3:DeleteObjectVersion", "s3:BypassGovernanceRetention"}},
		{Request{"s3", "CreateBucket", []Condition{ObjectLock}},
			[]string{"s3:CreateBucket", "s3:PutBucketVersioning", "s3:PutBucketObjectLockConfiguration"}},
		{Request{"s3", "CreateBucket", nil}, []string{"s3:CreateBucket"}},
		{Request{"iam", "CreateRole", nil}, []string{"iam:CreateRole"}},
		{Request{"s3", "CreateRole", nil}, nil},
	} {
		if got := Actions(tc.req); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.req, got, tc.want)
		}
	}
}

// TestMissingNamesTheRequest: a request whose operation, or one of whose conditions,
// no action of the list covers is named, with what it lacks.
func TestMissingNamesTheRequest(t *testing.T) {
	for _, tc := range []struct {
		req  Request
		want []string
	}{
		{Request{"s3", "PutBucketWebsite", nil}, []string{"s3 PutBucketWebsite: "}},
		{Request{"sts", "AssumeRoleWithWebIdentity", nil}, []string{"sts AssumeRoleWithWebIdentity: "}},
		{Request{"iam", "DeleteOpenIDConnectProvider", nil}, []string{"iam DeleteOpenIDConnectProvider: "}},
		// GetObjectTagging is listed, but not with this condition.
		{Request{"s3", "GetObjectTagging", []Condition{Unversioned, Tagged}}, []string{"s3 GetObjectTagging with tags: "}},
		// Listed for requests that name a version or do not, not for every request.
		{Request{"s3", "GetObjectTagging", nil}, []string{"s3 GetObjectTagging: "}},
		{Request{"s3", "GetObjectTagging", []Condition{Versioned}}, nil},
	} {
		got := Missing(tc.req)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %d", tc.req, got, len(tc.want))
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], tc.want[i]) {
				t.Errorf("%s: %q, want it to start %q", tc.req, got[i], tc.want[i])
			}
		}
	}
}
