package workload

import (
	"context"
	"time"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// requestTimeout bounds each of the application's requests.
const requestTimeout = 10 * time.Second

// SecretClient is the client an application makes from an access Secret's data (the
// AWS_* variables the README's recipe exports), nil when it names no endpoint: an
// unreadable Secret must not send the application to AWS.
func SecretClient(ctx context.Context, data map[string][]byte) s3.Client {
	endpoint := string(data[bkv1.AccessSecretKeyEndpoint])
	if endpoint == "" {
		return nil
	}
	c, err := s3.New(ctx, s3.Config{
		Endpoint: endpoint, Region: string(data[bkv1.AccessSecretKeyRegion]), ForcePathStyle: true,
		AccessKeyID: string(data[bkv1.AccessSecretKeyAccessKeyID]), SecretAccessKey: string(data[bkv1.AccessSecretKeySecretKey]),
		RequestTimeout: requestTimeout,
	})
	if err != nil {
		return nil
	}
	return c
}
