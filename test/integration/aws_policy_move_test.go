package integration_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/go-logr/logr/testr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/bucketkeeper/bucketkeeper/internal/awspolicy"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestMovesCallWhatTheAWSPolicyAllows moves a locked bucket from SeaweedFS to Ceph RGW
// with the mover (tags, a multipart object, a key deleted and written again, a legal
// hold, then a hold lifted on the target and a retention lengthened on the source,
// which a final pass sets in place) and holds every request it sent, as the SDK sent
// it (a version named, tags or a lock carried), to internal/awspolicy's list and to
// docs/access.md's AWS policy: the list has the actions of each request, and the
// policy grants each of them, on the bucket or on its objects. moto, which runs the
// operator under that policy in TestOperatorRunsUnderTheAWSPolicy, has no
// GetObjectRetention and authorizes the lock calls as plain reads and writes, so the
// actions are checked here, from what a move really sends.
func TestMovesCallWhatTheAWSPolicyAllows(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src, tgt := "mv-policy-"+randomHex(4), "mv-policy-"+randomHex(4)
	sc, tc := seaweed.Client(), rgw.Client()
	for _, b := range []struct {
		c    *awss3.Client
		srv  *testenv.S3Server
		name string
	}{{sc, seaweed, src}, {tc, rgw, tgt}} {
		_, err := b.c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(b.name), ObjectLockEnabledForBucket: aws.Bool(true)})
		must(t, err)
		t.Cleanup(func() { emptyLockedBucket(t, b.srv, b.name) })
		_, err = b.c.PutObjectLockConfiguration(ctx, &awss3.PutObjectLockConfigurationInput{Bucket: aws.String(b.name),
			ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled,
				Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeGovernance, Days: aws.Int32(1)}}}})
		must(t, err)
	}
	put := func(key, body string, in *awss3.PutObjectInput) {
		in.Bucket, in.Key, in.Body = aws.String(src), aws.String(key), strings.NewReader(body)
		_, err := sc.PutObject(ctx, in)
		must(t, err)
	}
	put("plain", "tagged", &awss3.PutObjectInput{Tagging: aws.String("team=data"), Metadata: map[string]string{"origin": "test"}})
	put("held", "on hold", &awss3.PutObjectInput{ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
	put("again", "first", &awss3.PutObjectInput{})
	_, err := sc.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(src), Key: aws.String("again")})
	must(t, err)
	put("again", "second", &awss3.PutObjectInput{})
	up, err := sc.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String(src), Key: aws.String("big")})
	must(t, err)
	var parts []types.CompletedPart
	for i, size := range []int{5 << 20, 1 << 10} {
		n := int32(i + 1)
		p, err := sc.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String(src), Key: aws.String("big"), UploadId: up.UploadId,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(bytes.Repeat([]byte{byte(n)}, size))})
		must(t, err)
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(n), ETag: p.ETag})
	}
	_, err = sc.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String(src), Key: aws.String("big"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	must(t, err)

	sent := &awspolicy.Recorder{}
	runner := &mover.InProcess{Checkpoints: &mover.ConfigMapCheckpoints{Client: k8s, Namespace: moverNamespace}, Log: testr.New(t),
		Backoff: 200 * time.Millisecond, Factory: func(ctx context.Context, cfg s3.Config) (s3.Client, error) {
			cfg.APIOptions = withRecorder(cfg.APIOptions, sent)
			return s3.New(ctx, cfg)
		}}
	spec := mover.Spec{MoveID: "aws-policy-" + randomHex(4), Versions: mover.VersionsAll,
		Source:     mover.Bucket{Endpoint: seaweed.Endpoint, Region: seaweed.Region, ForcePathStyle: true, Bucket: src},
		Target:     mover.Bucket{Endpoint: rgw.Endpoint, Region: rgw.Region, ForcePathStyle: true, Bucket: tgt},
		ObjectLock: &mover.LockRules{AllowedModes: []s3.RetentionMode{s3.RetentionGovernance, s3.RetentionCompliance}},
		Limits:     mover.Limits{CheckpointInterval: mover.Duration{Duration: time.Second}}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = runner.Forget(ctx, spec.MoveID)
		runner.Close()
	})
	final := func(pass int) mover.Progress {
		t.Helper()
		s := spec
		s.Mode, s.Pass = mover.ModeFinal, pass
		must(t, runner.Start(ctx, mover.Move{Spec: s,
			Source: mover.Credentials{AccessKeyID: seaweed.AccessKeyID, SecretAccessKey: seaweed.SecretAccessKey},
			Target: mover.Credentials{AccessKeyID: rgw.AccessKeyID, SecretAccessKey: rgw.SecretAccessKey}}))
		var p mover.Progress
		var perr error
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			p, perr = runner.Progress(ctx, spec.MoveID, pass, 1)
			return perr == nil && p.Done == 1, nil
		}); err != nil {
			t.Fatalf("final pass %d not done after 3m: %+v (%v)", pass, p, perr)
		}
		return p
	}
	if p := final(1); !p.Verified || p.Failures.Count != 0 {
		t.Fatalf("final pass: verified %v, failures %s, differences %s", p.Verified, p.Failures, p.Differences)
	}
	// The target's hold lifted, the source's retention lengthened: the next final
	// pass sets both in place.
	_, err = tc.PutObjectLegalHold(ctx, &awss3.PutObjectLegalHoldInput{Bucket: aws.String(tgt), Key: aws.String("held"),
		LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOff}})
	must(t, err)
	_, err = sc.PutObjectRetention(ctx, &awss3.PutObjectRetentionInput{Bucket: aws.String(src), Key: aws.String("plain"),
		Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeGovernance, RetainUntilDate: aws.Time(time.Now().Add(48 * time.Hour))}})
	must(t, err)
	if p := final(2); p.Counts.Locked != 2 {
		t.Fatalf("final pass after the locks changed: %d set in place, want 2; differences %s", p.Counts.Locked, p.Differences)
	}
	if p := final(3); !p.Verified {
		t.Fatalf("the next final pass: differences %s", p.Differences)
	}

	policy := awsOperatorPolicy(t, "123456789012", "team")
	called := map[string]bool{}
	for _, req := range sent.Requests() {
		called[req.Operation] = true
		if req.Service != "s3" {
			t.Errorf("the move sent %s: a mover sends only S3 requests", req)
		}
	}
	for _, op := range []string{"GetObjectRetention", "GetObjectLegalHold", "PutObjectRetention", "PutObjectLegalHold", "CreateMultipartUpload", "GetObjectTagging", "UploadPart"} {
		if !called[op] {
			t.Errorf("the move never called %s: the test does not show what it needs", op)
		}
	}
	for _, m := range sent.Missing() {
		t.Errorf("the move sent %s", m)
	}
	for _, req := range sent.Requests() {
		for _, action := range awspolicy.Actions(req) {
			if object := strings.HasSuffix(awspolicy.ResourceOf(action), "/*"); !policy.allows(action, object) {
				t.Errorf("docs/access.md's AWS policy does not allow %s on the %s, which the move's %s needs", action, map[bool]string{true: "objects", false: "bucket"}[object], req)
			}
		}
	}
}

// allows says whether a statement of the policy allows action on a bucket of the
// operator's (object: on its objects).
func (p awsPolicy) allows(action string, object bool) bool {
	for _, st := range p.Statement {
		res, _ := st["Resource"].(string)
		if st["Effect"] == "Allow" && slices.Contains(actionsOf(st["Action"]), action) &&
			strings.HasPrefix(res, "arn:aws:s3:::") && strings.HasSuffix(res, "/*") == object {
			return true
		}
	}
	return false
}
