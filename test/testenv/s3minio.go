package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// MinIO runs as one server over one directory (its single-drive mode), the binary built
// unmodified from MinIO's module (hack/peers/build.sh): MinIO is AGPL-3.0, so nothing of
// it is imported, here or in the operator; the tests only talk to the process.
//
// Its root credentials come from the environment (not visible in ps). Its second
// identity is a session of root's (STS AssumeRole): a user of its own would need
// MinIO's admin API, whose request bodies only MinIO's own client library encrypts.
// A MinIO bucket has no owner but the deployment, so a session answers a taken name as
// any MinIO user would.

// minioSessionDuration is how long the second identity's session lasts: longer than
// any test binary runs.
const minioSessionDuration = 12 * time.Hour

// configureMinIO picks the S3 port and builds the command line: `minio server` on
// 127.0.0.1 with its console off (MINIO_BROWSER=off opens no second port), no update
// check, and its certificates directory and HOME inside the server's directory, so
// nothing lands in ~/.minio. MinIO listens on ::1 too: it always adds every loopback
// address to the one it is given.
func (s *S3Server) configureMinIO() error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	s.ports = map[string]int{"s3": ports[0]}
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	s.IAMEndpoint = "" // MinIO serves no AWS IAM API
	dirs := map[string]string{}
	for _, d := range []string{"data", "certs", "tmp"} {
		dirs[d] = filepath.Join(s.dir, d)
		if err := os.MkdirAll(dirs[d], 0o755); err != nil {
			return err
		}
	}
	s.args = []string{
		"server",
		"--address", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--certs-dir", dirs["certs"],
		dirs["data"],
	}
	s.env = childEnv(dirs["tmp"],
		"MINIO_ROOT_USER="+s.AccessKeyID,
		"MINIO_ROOT_PASSWORD="+s.SecretAccessKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
		"HOME="+dirs["tmp"],
	)
	return nil
}

// minioLive reports whether MinIO's liveness endpoint answers 200: the server has
// started and serves requests.
func (s *S3Server) minioLive(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/minio/health/live", nil)
	if err != nil {
		return err
	}
	resp, err := loopbackHTTP.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /minio/health/live: %s", resp.Status)
	}
	return nil
}

// createMinIOSession makes the second identity a session of root's (see above) and
// records its key, secret and token.
func (s *S3Server) createMinIOSession() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := sts.New(sts.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKeyID, s.SecretAccessKey, ""),
		HTTPClient:   loopbackHTTP,
	})
	// MinIO answers its liveness check before its IAM subsystem has loaded: until then
	// STS answers "Server not initialized, please try again" (seen on a loaded machine),
	// so the server is ready once this session is made.
	var out *sts.AssumeRoleOutput
	for {
		var err error
		out, err = c.AssumeRole(ctx, &sts.AssumeRoleInput{
			RoleArn:         aws.String("arn:aws:iam::minio:role/other-tenant"), // MinIO ignores it
			RoleSessionName: aws.String(otherUser),
			DurationSeconds: aws.Int32(int32(minioSessionDuration / time.Second)),
		})
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "Server not initialized") || ctx.Err() != nil {
			return fmt.Errorf("testenv: minio AssumeRole for the second identity: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: minio AssumeRole for the second identity: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if out.Credentials == nil {
		return errors.New("testenv: minio AssumeRole answered without credentials")
	}
	s.OtherAccessKeyID = aws.ToString(out.Credentials.AccessKeyId)
	s.OtherSecretAccessKey = aws.ToString(out.Credentials.SecretAccessKey)
	s.OtherSessionToken = aws.ToString(out.Credentials.SessionToken)
	return nil
}
