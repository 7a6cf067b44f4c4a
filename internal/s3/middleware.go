package s3

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // Content-MD5 is an integrity header, not security
	"encoding/base64"
	"fmt"
	"io"
	"strings"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"golang.org/x/time/rate"
)

type middlewareStack = middleware.Stack

// IsMutating reports whether the SDK operation name (as passed to
// Config.Observer) changes state on the store. Tests use it to assert that
// a steady-state reconcile only reads; metrics can split reads and writes.
func IsMutating(operation string) bool {
	for _, p := range []string{"Create", "Put", "Delete", "Restore", "Copy", "Upload", "Complete", "Abort"} {
		if strings.HasPrefix(operation, p) {
			return true
		}
	}
	return false
}

// attemptMiddleware paces and reports each HTTP attempt. It sits in the
// Finalize step right after the SDK's retry loop, so every retry takes a
// token and is observed, and before signing, so a long wait for a token
// does not age the signature.
func attemptMiddleware(limiter *rate.Limiter, observe func(string, int, error)) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		if limiter == nil && observe == nil {
			return nil
		}
		return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("bucketkeeperAttempt",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
				middleware.FinalizeOutput, middleware.Metadata, error,
			) {
				op := awsmiddleware.GetOperationName(ctx)
				if limiter != nil {
					if err := limiter.Wait(ctx); err != nil {
						err = waitError(ctx, err)
						if observe != nil {
							observe(op, 0, err)
						}
						return middleware.FinalizeOutput{}, middleware.Metadata{}, err
					}
				}
				out, md, err := next.HandleFinalize(ctx, in)
				if observe != nil {
					observe(op, attemptStatus(md, err), err)
				}
				return out, md, err
			}), "Retry", middleware.After)
	}
}

// ObserveAttempts reports each HTTP attempt of another AWS SDK client (the IAM
// driver's) to observe as Config.Observer hears S3's; nil observes nothing.
func ObserveAttempts(observe func(operation string, httpStatus int, err error)) func(*middleware.Stack) error {
	return attemptMiddleware(nil, observe)
}

// waitError makes a token wait that would overrun the deadline look like
// the deadline it is: rate.Limiter.Wait fails early with its own error when
// the wait cannot finish in time.
func waitError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if _, ok := ctx.Deadline(); ok {
		return fmt.Errorf("waiting for the request budget: %w (%w)", context.DeadlineExceeded, err)
	}
	return err
}

func attemptStatus(md middleware.Metadata, err error) int {
	if err != nil {
		return statusOf(err)
	}
	if resp, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response); ok && resp != nil {
		return resp.StatusCode
	}
	return 0
}

// md5Operations need a Content-MD5 header on stores that predate AWS's
// flexible checksums (MinIO, Ceph RGW, OCI, older SeaweedFS): the SDK only
// sends x-amz-checksum-crc32 for them since 2025. AWS accepts both.
var md5Operations = map[string]bool{
	"DeleteObjects":                   true,
	"PutBucketTagging":                true,
	"PutBucketLifecycleConfiguration": true,
	"PutPublicAccessBlock":            true,
	"PutBucketCors":                   true,
	"PutBucketVersioning":             true,
	"PutBucketPolicy":                 true,
	"PutObjectLockConfiguration":      true,
}

// contentMD5Middleware adds Content-MD5 to the operations above. It runs in
// the Build step, before signing, and keeps the body seekable for retries.
func contentMD5Middleware(stack *middleware.Stack) error {
	return stack.Build.Add(middleware.BuildMiddlewareFunc("bucketkeeperContentMD5",
		func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (
			middleware.BuildOutput, middleware.Metadata, error,
		) {
			req, ok := in.Request.(*smithyhttp.Request)
			if !ok || !md5Operations[awsmiddleware.GetOperationName(ctx)] || req.Header.Get("Content-MD5") != "" {
				return next.HandleBuild(ctx, in)
			}
			var body []byte
			if s := req.GetStream(); s != nil {
				b, err := io.ReadAll(s)
				if err != nil {
					return middleware.BuildOutput{}, middleware.Metadata{}, err
				}
				body = b
				r, err := req.SetStream(bytes.NewReader(body))
				if err != nil {
					return middleware.BuildOutput{}, middleware.Metadata{}, err
				}
				req = r
				in.Request = req
			}
			sum := md5.Sum(body) //nolint:gosec
			req.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
			return next.HandleBuild(ctx, in)
		}), middleware.After)
}

// closeAfterOperations are answered by some stores with bytes beyond the response:
// Ceph RGW (20.2) answers GetPublicAccessBlock of a bucket without one with its 404
// NoSuchPublicAccessBlockConfiguration error and then, past the Content-Length, a
// default configuration. On a kept-alive connection those bytes would be read as the
// start of the next response on it (a malformed answer to an unrelated request), or
// make Go drop the connection with "Unsolicited response received on idle HTTP
// channel". Their connection is closed after the answer instead: one connection per
// such call, once per bucket and sync.
var closeAfterOperations = map[string]bool{
	"GetPublicAccessBlock": true,
}

// closeAfterMiddleware asks for the connection to be closed after the operations
// above ("Connection: close"), so nothing a store sends after their answer is read
// as another request's.
func closeAfterMiddleware(stack *middleware.Stack) error {
	return stack.Build.Add(middleware.BuildMiddlewareFunc("bucketkeeperCloseAfter",
		func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (
			middleware.BuildOutput, middleware.Metadata, error,
		) {
			if req, ok := in.Request.(*smithyhttp.Request); ok && closeAfterOperations[awsmiddleware.GetOperationName(ctx)] {
				req.Close = true
			}
			return next.HandleBuild(ctx, in)
		}), middleware.After)
}
