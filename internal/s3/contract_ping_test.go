package s3

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// pingContract pins how each server answers the health check's ListBuckets with
// max-buckets=1 (SeaweedFS and Versity honour it: one bucket and a continuation
// token; RGW ignores it and answers every bucket in one page, which Ping takes as
// it comes), and that a bucket-scoped identity (SeaweedFS's third identity)
// passes the health check.
func pingContract(ctx context.Context, t *testing.T, s *store) {
	for range 2 {
		must(t, "CreateBucket", s.c.CreateBucket(ctx, s.bucket(t), ""))
	}
	out, err := s.srv.Client().ListBuckets(ctx, &awss3.ListBucketsInput{MaxBuckets: aws.Int32(1)})
	must(t, "ListBuckets max-buckets=1", err)
	t.Logf("ANSWER %s | ListBuckets max-buckets=1 | %d buckets, continuation token %t",
		s.kind, len(out.Buckets), aws.ToString(out.ContinuationToken) != "")
	if s.expect.ignoresMaxBuckets {
		if len(out.Buckets) < 2 || aws.ToString(out.ContinuationToken) != "" {
			t.Errorf("max-buckets=1 answered %d buckets and token %q; want all, no token", len(out.Buckets), aws.ToString(out.ContinuationToken))
		}
	} else if len(out.Buckets) != 1 {
		t.Errorf("max-buckets=1 answered %d buckets, want 1", len(out.Buckets))
	}
	must(t, "Ping", s.c.Ping(ctx))
	if s.expect.ignoresMaxBuckets {
		observedTable.Set(t, s.kind, rowHealth, "yes (max-buckets ignored: every bucket in one page)")
	} else {
		observedTable.Set(t, s.kind, rowHealth, "yes")
	}

	if s.srv.ScopedAccessKeyID == "" {
		return
	}
	scoped, _ := s.client(t, func(c *Config) {
		c.AccessKeyID, c.SecretAccessKey = s.srv.ScopedAccessKeyID, s.srv.ScopedSecretAccessKey
	})
	err = scoped.Ping(ctx)
	answer(t, s, "Ping by the bucket-scoped identity", err)
	if err != nil {
		t.Errorf("Ping by the bucket-scoped identity: %v", err)
	}
	wantKind(t, s, "CreateBucket by the bucket-scoped identity", scoped.CreateBucket(ctx, s.bucket(t), ""), KindAccessDenied)
}
