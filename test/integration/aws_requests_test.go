package integration_test

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/aws/smithy-go/middleware"

	"github.com/bucketkeeper/bucketkeeper/internal/awspolicy"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// awsRequests records every S3 and IAM request the suite's managers send, on every
// store, the in-process movers' included: after the run, each must be one whose AWS
// actions internal/awspolicy lists (checkAWSRequests), so a call added without its
// action fails the suite by name, whichever test reached it.
var awsRequests = &awspolicy.Recorder{}

// recordAWSRequests makes opts' S3 and IAM clients record into awsRequests.
func recordAWSRequests(opts *operator.Options) {
	newS3, newIAM := opts.S3Factory, opts.IAMFactory
	if newS3 == nil {
		newS3 = s3.New
	}
	if newIAM == nil {
		newIAM = iam.New
	}
	opts.S3Factory = func(ctx context.Context, cfg s3.Config) (s3.Client, error) {
		cfg.APIOptions = withRecorder(cfg.APIOptions, awsRequests)
		return newS3(ctx, cfg)
	}
	opts.IAMFactory = func(ctx context.Context, cfg iam.Config) (iam.Driver, error) {
		cfg.APIOptions = withRecorder(cfg.APIOptions, awsRequests)
		return newIAM(ctx, cfg)
	}
}

// withRecorder is opts with rec's middleware added (opts itself unchanged).
func withRecorder(opts []func(*middleware.Stack) error, rec *awspolicy.Recorder) []func(*middleware.Stack) error {
	return append(slices.Clip(opts), rec.Middleware)
}

// checkAWSRequests fails the run (returns 1) when a request the managers sent lacks
// its action in internal/awspolicy's list, naming each.
func checkAWSRequests(code int) int {
	missing := awsRequests.Missing()
	for _, m := range missing {
		fmt.Fprintf(os.Stderr, "FAIL: the operator sent %s (add the action to internal/awspolicy, then make docs)\n", m)
	}
	if len(missing) > 0 {
		return 1
	}
	return code
}
