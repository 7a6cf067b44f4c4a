package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/bucketkeeper/bucketkeeper/internal/localpeers"
)

// otherUser is the IAM user that stands for the second account on servers
// whose second account lives in IAM (Versity).
const otherUser = "other-tenant"

// IAMClient returns an AWS IAM client for the admin identity, signed for
// IAMRegion, with no shared config or environment lookups.
func (s *S3Server) IAMClient() *iam.Client {
	return iam.New(iam.Options{
		Region:       s.IAMRegion,
		BaseEndpoint: aws.String(s.IAMEndpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKeyID, s.SecretAccessKey, ""),
		HTTPClient:   loopbackHTTP,
	})
}

// IAMPID returns the PID of the server's separate IAM process, or 0 when it has
// none or it is stopped.
func (s *S3Server) IAMPID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.iamProc == nil || s.iamProc.Exited() {
		return 0
	}
	return s.iamProc.PID()
}

// startIAMLocked starts the separate IAM process and waits until it answers a
// signed ListUsers.
func (s *S3Server) startIAMLocked() error {
	bin, args := s.inPrivateEtc(s.bin, s.iamArgs)
	p, err := StartProcess(bin, args, s.env, s.dir, s.iamLog)
	if err != nil {
		return err
	}
	s.iamProc = p
	if err := s.waitIAMReady(p); err != nil {
		_ = s.stopIAMLocked()
		tail := localpeers.LogTail(s.iamLog)
		if bindConflict(tail) {
			err = fmt.Errorf("%w: %v", errBindConflict, err)
		}
		return fmt.Errorf("testenv: %s IAM service at %s: %w\n--- tail of %s ---\n%s", s.Kind, s.IAMEndpoint, err, s.iamLog, tail)
	}
	p.Serving()
	return nil
}

func (s *S3Server) stopIAMLocked() error {
	if s.iamProc == nil {
		return nil
	}
	err := s.iamProc.Stop()
	s.iamProc = nil
	return err
}

func (s *S3Server) waitIAMReady(p *Process) error {
	client := s.IAMClient()
	deadline := time.Now().Add(readyTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := client.ListUsers(ctx, &iam.ListUsersInput{MaxItems: aws.Int32(1)}, func(o *iam.Options) { o.Retryer = aws.NopRetryer{} })
		cancel()
		if err == nil {
			return nil
		}
		lastErr = err
		if p.Exited() {
			return fmt.Errorf("process exited before it was ready (%v); last probe: %v", p.err, lastErr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %s: %v", readyTimeout, lastErr)
}

// createOtherUser makes the second account an IAM user allowed to use and create
// any bucket, with one access key, and records that key.
func (s *S3Server) createOtherUser() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := s.IAMClient()
	if _, err := c.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String(otherUser)}); err != nil {
		return fmt.Errorf("testenv: create IAM user %s: %w", otherUser, err)
	}
	policy, _ := json.Marshal(map[string]any{
		"Version": "2012-10-17",
		"Statement": []map[string]any{{
			"Effect": "Allow", "Action": []string{"s3:*"}, "Resource": []string{"arn:aws:s3:::*"},
		}},
	})
	if _, err := c.PutUserPolicy(ctx, &iam.PutUserPolicyInput{
		UserName: aws.String(otherUser), PolicyName: aws.String("all-buckets"), PolicyDocument: aws.String(string(policy)),
	}); err != nil {
		return fmt.Errorf("testenv: policy of IAM user %s: %w", otherUser, err)
	}
	out, err := c.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String(otherUser)})
	if err != nil {
		return fmt.Errorf("testenv: key of IAM user %s: %w", otherUser, err)
	}
	if out.AccessKey == nil {
		return errors.New("testenv: CreateAccessKey answered without a key")
	}
	s.OtherAccessKeyID, s.OtherSecretAccessKey = aws.ToString(out.AccessKey.AccessKeyId), aws.ToString(out.AccessKey.SecretAccessKey)
	// The gateway learns of a new key from the IAM service; wait for the fact.
	other := s.OtherClient()
	for {
		_, err := other.ListBuckets(ctx, &s3.ListBucketsInput{})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: key of IAM user %s not accepted: %w", otherUser, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
