package s3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/time/rate"
)

// DefaultRegion is used when Config.Region is empty. SigV4 needs some
// region, and us-east-1 is what every S3-compatible store accepts.
const DefaultRegion = "us-east-1"

// MaxAttempts is the SDK's attempt budget per call. It is small on purpose:
// the controller's requeue backoff is the real retry loop, and a long SDK
// loop would hide a sick store behind slow reconciles.
const MaxAttempts = 3

// maxRetryBackoff caps the SDK's sleep between attempts (its default is
// 20s, far longer than a reconcile should block). A variable so unit tests
// of retried statuses stay fast.
var maxRetryBackoff = 2 * time.Second

// Config describes one object store and how to talk to it.
type Config struct {
	// Endpoint is the store's base URL ("https://s3.example:9000"). Empty
	// means AWS S3, resolved from Region.
	Endpoint string
	// Region signs requests; empty means DefaultRegion.
	Region string
	// ForcePathStyle addresses buckets as /bucket instead of
	// bucket.host; most self-hosted stores need it.
	ForcePathStyle bool

	// Static credentials. When all three are empty the SDK's default chain
	// (environment, shared config, web identity, IMDS) is used instead.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string

	// CABundle holds extra PEM certificates trusted in addition to the
	// system pool, for stores behind a private CA.
	CABundle []byte
	// InsecureSkipTLSVerify turns certificate verification off. Off by
	// default; meant for throw-away test stores only.
	InsecureSkipTLSVerify bool

	// RequestTimeout bounds each Client method call, SDK retries included,
	// and is also the transport's wait for response headers, so a store that
	// accepts connections and never answers fails the call instead of holding
	// it. A caller's earlier deadline (a probe's own timeout) still wins.
	// Zero means only the caller's context applies (and no header timeout).
	RequestTimeout time.Duration
	// MinTransferRate (bytes per second) extends RequestTimeout for the calls that
	// stream an object's bytes: they may take RequestTimeout plus their size at this
	// rate. Zero means DefaultMinTransferRate.
	MinTransferRate int64
	// MaxIdleConnsPerHost is how many idle connections to the store are kept for
	// reuse; zero keeps the SDK's default (10). A mover copying with many workers
	// needs one per worker, or it opens a connection per request.
	MaxIdleConnsPerHost int

	// RequestsPerSecond and Burst form a token bucket shared by every
	// request (each attempt) made through this Client, so one store is never
	// hit harder than this however many buckets reconcile at once. Zero
	// RequestsPerSecond means unlimited; Burst <= 0 means
	// max(1, ceil(RequestsPerSecond)).
	RequestsPerSecond float64
	Burst             int
	// Limiter, when set, is the token bucket to use instead of one built from
	// RequestsPerSecond and Burst: clients of one store that sign for different
	// regions share it, so the store's budget holds across all of them.
	Limiter *rate.Limiter

	// Observer, if set, is called once per HTTP attempt with the SDK
	// operation name (see IsMutating), the HTTP status (0 when no answer
	// arrived) and the attempt's raw error (nil on success; classify it with
	// KindOf). It runs on the request path: keep it fast and thread-safe.
	Observer func(operation string, httpStatus int, err error)

	// APIOptions are more middleware for the SDK client, after the Client's own:
	// tests record with them every request sent (awspolicy.Recorder).
	APIOptions []func(*middleware.Stack) error
}

// DefaultMinTransferRate is Config.MinTransferRate's default: 1 MiB/s, so a 64 MiB
// part may take RequestTimeout plus 64 s.
const DefaultMinTransferRate = 1 << 20

// Factory builds a Client. Controllers take one so tests can inject fakes.
type Factory func(context.Context, Config) (Client, error)

var _ Factory = New

// New validates cfg and builds a Client. It does no I/O except, when no
// static credentials are given, loading the SDK's default credential chain
// configuration (credentials themselves are fetched lazily).
func New(ctx context.Context, cfg Config) (Client, error) {
	region := cfg.Region
	if region == "" {
		region = DefaultRegion
	}
	creds, err := Credentials(ctx, cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken, region)
	if err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	httpClient, err := newHTTPClient(cfg)
	if err != nil {
		return nil, err
	}
	endpoint, err := EndpointURL(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	if cfg.RequestsPerSecond < 0 || math.IsNaN(cfg.RequestsPerSecond) {
		return nil, errors.New("s3: RequestsPerSecond must not be negative")
	}

	c := &client{
		timeout: cfg.RequestTimeout,
		minRate: cfg.MinTransferRate,
		redact:  redactor{cfg.SecretAccessKey, cfg.SessionToken},
	}
	if c.minRate <= 0 {
		c.minRate = DefaultMinTransferRate
	}
	c.limiter = cfg.Limiter
	if c.limiter == nil {
		c.limiter = NewLimiter(cfg.RequestsPerSecond, cfg.Burst)
	}

	retryer := retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = MaxAttempts
		o.MaxBackoff = maxRetryBackoff
		// The SDK's retry quota would turn a burst of failures into
		// "retry quota exceeded" errors that hide the real cause.
		o.RateLimiter = ratelimit.None
		// A certificate problem does not fix itself within a second.
		o.Retryables = append([]retry.IsErrorRetryable{
			retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
				if statusOf(err) == 0 && isTLSError(err) {
					return aws.FalseTernary
				}
				return aws.UnknownTernary
			}),
		}, o.Retryables...)
	})

	c.api = awss3.New(awss3.Options{
		Region:        region,
		BaseEndpoint:  endpoint,
		UsePathStyle:  cfg.ForcePathStyle,
		Credentials:   creds,
		HTTPClient:    httpClient,
		Retryer:       retryer,
		Logger:        logging.Nop{},
		ClientLogMode: 0, // never log requests: they carry signatures
		DefaultsMode:  aws.DefaultsModeStandard,
		// Compatible stores lag behind AWS's newer checksum headers;
		// compute them only where the API requires one (and we add
		// Content-MD5 there too, see contentMD5Middleware).
		RequestChecksumCalculation:                aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation:                aws.ResponseChecksumValidationWhenRequired,
		DisableLogOutputChecksumValidationSkipped: true,
		DisableS3ExpressSessionAuth:               aws.Bool(true),
		APIOptions: append([]func(*middlewareStack) error{
			attemptMiddleware(c.limiter, cfg.Observer),
			contentMD5Middleware,
			closeAfterMiddleware,
		}, cfg.APIOptions...),
	})
	return c, nil
}

// NewLimiter is the token bucket of Config.RequestsPerSecond and Config.Burst, or
// nil (unlimited) for a zero or infinite rate. Burst <= 0 means
// max(1, ceil(requestsPerSecond)).
func NewLimiter(requestsPerSecond float64, burst int) *rate.Limiter {
	if requestsPerSecond <= 0 || math.IsInf(requestsPerSecond, 1) || math.IsNaN(requestsPerSecond) {
		return nil
	}
	if burst <= 0 {
		burst = max(1, int(math.Ceil(requestsPerSecond)))
	}
	return rate.NewLimiter(rate.Limit(requestsPerSecond), burst)
}

// Credentials returns static credentials, or the SDK default chain when none
// are given. A partial key pair is an error (without the values). The store's
// IAM client signs with the same credentials, so it takes them from here too.
func Credentials(ctx context.Context, accessKeyID, secretAccessKey, sessionToken, region string) (aws.CredentialsProvider, error) {
	switch {
	case accessKeyID == "" && secretAccessKey == "" && sessionToken == "":
		def, err := config.LoadDefaultConfig(ctx, config.WithRegion(region))
		if err != nil {
			return nil, fmt.Errorf("loading the default credential chain: %w", err)
		}
		return def.Credentials, nil
	case accessKeyID == "" || secretAccessKey == "":
		return nil, errors.New("AccessKeyID and SecretAccessKey must be set together")
	}
	return aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(accessKeyID, secretAccessKey, sessionToken)), nil
}

// EndpointURL checks that endpoint is an absolute http(s) URL; "" means the
// SDK resolves AWS's endpoint from the region (nil).
func EndpointURL(endpoint string) (*string, error) {
	if endpoint == "" {
		return nil, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q must be an absolute http(s) URL", endpoint)
	}
	return aws.String(endpoint), nil
}

// connectTimeout bounds dialing and, separately, the TLS handshake. Both are
// cut to RequestTimeout when that is shorter, so no phase of a request can
// outlast the call it belongs to.
const connectTimeout = 5 * time.Second

// newHTTPClient builds the store's transport (see NewHTTPClient).
func newHTTPClient(cfg Config) (aws.HTTPClient, error) {
	c, err := buildHTTPClient(cfg.CABundle, cfg.InsecureSkipTLSVerify, cfg.RequestTimeout, cfg.MaxIdleConnsPerHost)
	if err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	return c, nil
}

// NewHTTPClient builds a transport for an S3-compatible store's APIs (S3 and IAM):
// TLS 1.2+, verification on unless explicitly disabled, caBundle added to the system
// roots, and a deadline on every phase of a request (see connectTimeout; requestTimeout
// also bounds the wait for response headers, zero leaving that to the call's deadline).
// The client is frozen: otherwise the SDK's defaults mode would overwrite the dial and
// handshake timeouts with its own.
func NewHTTPClient(caBundle []byte, insecureSkipVerify bool, requestTimeout time.Duration) (aws.HTTPClient, error) {
	return buildHTTPClient(caBundle, insecureSkipVerify, requestTimeout, 0)
}

// buildHTTPClient is NewHTTPClient keeping idleConns idle connections per host (zero:
// the SDK's default).
func buildHTTPClient(caBundle []byte, insecureSkipVerify bool, requestTimeout time.Duration, idleConns int) (aws.HTTPClient, error) {
	tlsCfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: insecureSkipVerify, //nolint:gosec // opt-in, documented
	}
	if len(caBundle) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("CABundle contains no PEM certificate")
		}
		tlsCfg.RootCAs = pool
	}
	connect := connectTimeout
	if requestTimeout > 0 {
		connect = min(connect, requestTimeout)
	}
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = connect }).
		WithTransportOptions(func(tr *http.Transport) {
			tr.TLSClientConfig = tlsCfg
			tr.ForceAttemptHTTP2 = true
			tr.IdleConnTimeout = 90 * time.Second
			tr.TLSHandshakeTimeout = connect
			tr.ResponseHeaderTimeout = requestTimeout
			if idleConns > 0 {
				tr.MaxIdleConnsPerHost = idleConns
			}
		}).Freeze(), nil
}
