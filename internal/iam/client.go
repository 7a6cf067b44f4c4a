package iam

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// DefaultRegion signs IAM requests when none is configured: AWS's IAM is a
// global service signed for us-east-1, and Versity's IAM service expects it too.
const DefaultRegion = "us-east-1"

// DefaultTimeout bounds each call when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Config says how to reach an IAM endpoint.
type Config struct {
	// Endpoint is the IAM URL; empty means AWS IAM.
	Endpoint string
	// Region signs requests; empty means DefaultRegion.
	Region string
	// Static operator credentials; all empty means the SDK's default chain.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// CABundle and InsecureSkipTLSVerify as for the store's S3 endpoint.
	CABundle              []byte
	InsecureSkipTLSVerify bool
	// Timeout bounds each call, SDK retries included; zero means DefaultTimeout.
	Timeout time.Duration
	// Observer, if set, is called once per HTTP attempt with the IAM operation name,
	// the HTTP status (0 when no answer arrived) and the attempt's error, as
	// s3.Config.Observer is.
	Observer func(operation string, httpStatus int, err error)
	// APIOptions are more middleware for the SDK client, as s3.Config's (the AWS IAM
	// API only).
	APIOptions []func(*middleware.Stack) error
	// API is the API that manages the store's users: APIAWS (also when empty) or
	// APIMinIO.
	API API
}

// Factory builds a Driver; controllers take one so tests can inject another.
type Factory func(context.Context, Config) (Driver, error)

var _ Factory = New

type client struct {
	api     *awsiam.Client
	timeout time.Duration
}

// New builds a Driver over the AWS SDK's IAM client, or over MinIO's admin API when
// cfg.API says so. It sends no request.
func New(ctx context.Context, cfg Config) (Driver, error) {
	switch cfg.API {
	case APIMinIO:
		return newMinIO(cfg)
	case APIAWS, "":
	default:
		return nil, fmt.Errorf("iam: unknown API %q", cfg.API)
	}
	region := cfg.Region
	if region == "" {
		region = DefaultRegion
	}
	creds, err := s3.Credentials(ctx, cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken, region)
	if err != nil {
		return nil, fmt.Errorf("iam: %w", err)
	}
	endpoint, err := s3.EndpointURL(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("iam: %w", err)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// The store's own transport: the same TLS rules, and a deadline on dialing, the
	// handshake and the response headers, besides the per-call deadline.
	httpClient, err := s3.NewHTTPClient(cfg.CABundle, cfg.InsecureSkipTLSVerify, timeout)
	if err != nil {
		return nil, fmt.Errorf("iam: %w", err)
	}
	return &client{
		timeout: timeout,
		api: awsiam.New(awsiam.Options{
			Region:       region,
			BaseEndpoint: endpoint,
			Credentials:  creds,
			HTTPClient:   httpClient,
			Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 3
				o.MaxBackoff = 2 * time.Second
				o.RateLimiter = ratelimit.None
			}),
			Logger:        logging.Nop{},
			ClientLogMode: 0, // never log requests: CreateAccessKey's answer holds a secret
			APIOptions:    append([]func(*middleware.Stack) error{s3.ObserveAttempts(cfg.Observer)}, cfg.APIOptions...),
		}),
	}, nil
}

// call runs fn under the per-call deadline and classifies its error.
func (c *client) call(ctx context.Context, op, user string, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return wrap(op, user, fn(ctx))
}

func (c *client) Check(ctx context.Context) error {
	return c.call(ctx, "ListUsers", "", func(ctx context.Context) error {
		_, err := c.api.ListUsers(ctx, &awsiam.ListUsersInput{MaxItems: aws.Int32(1)})
		return err
	})
}

func (c *client) EnsureUser(ctx context.Context, user string) error {
	if !ValidUserName(user) {
		return &Error{Op: "CreateUser", User: user, Kind: KindInvalid, msg: "not a valid IAM user name"}
	}
	err := c.call(ctx, "CreateUser", user, func(ctx context.Context) error {
		_, err := c.api.CreateUser(ctx, &awsiam.CreateUserInput{UserName: aws.String(user)})
		return err
	})
	if KindOf(err) == KindEntityAlreadyExists {
		return nil // the name is derived from our own object: it is ours
	}
	return err
}

func (c *client) PutPolicy(ctx context.Context, user string, grants []Grant) error {
	doc, err := PolicyDocument(grants)
	if err != nil {
		return &Error{Op: "PutUserPolicy", User: user, Kind: KindInvalid, msg: err.Error()}
	}
	return c.call(ctx, "PutUserPolicy", user, func(ctx context.Context) error {
		_, err := c.api.PutUserPolicy(ctx, &awsiam.PutUserPolicyInput{
			UserName: aws.String(user), PolicyName: aws.String(PolicyName), PolicyDocument: aws.String(doc),
		})
		return err
	})
}

func (c *client) DeletePolicy(ctx context.Context, user string) error {
	err := c.call(ctx, "DeleteUserPolicy", user, func(ctx context.Context) error {
		_, err := c.api.DeleteUserPolicy(ctx, &awsiam.DeleteUserPolicyInput{UserName: aws.String(user), PolicyName: aws.String(PolicyName)})
		return err
	})
	return goneIsDone(err)
}

func (c *client) ListKeys(ctx context.Context, user string) ([]AccessKey, error) {
	var keys []AccessKey
	err := c.call(ctx, "ListAccessKeys", user, func(ctx context.Context) error {
		keys = nil
		p := awsiam.NewListAccessKeysPaginator(c.api, &awsiam.ListAccessKeysInput{UserName: aws.String(user)})
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			if err != nil {
				return err
			}
			for _, k := range out.AccessKeyMetadata {
				keys = append(keys, AccessKey{ID: aws.ToString(k.AccessKeyId), Created: aws.ToTime(k.CreateDate)})
			}
		}
		return nil
	})
	sort.SliceStable(keys, func(i, j int) bool { return keys[i].Created.Before(keys[j].Created) })
	return keys, err
}

func (c *client) CreateKey(ctx context.Context, user string) (AccessKey, error) {
	var key AccessKey
	err := c.call(ctx, "CreateAccessKey", user, func(ctx context.Context) error {
		// One attempt: a retry after an answer that was lost makes a second key, whose
		// secret the first one's caller never sees (the access collector revokes the
		// orphan, but it is a live key until then). The next reconcile tries again.
		out, err := c.api.CreateAccessKey(ctx, &awsiam.CreateAccessKeyInput{UserName: aws.String(user)},
			func(o *awsiam.Options) { o.RetryMaxAttempts = 1 })
		if err != nil {
			return err
		}
		if out.AccessKey == nil || aws.ToString(out.AccessKey.AccessKeyId) == "" || aws.ToString(out.AccessKey.SecretAccessKey) == "" {
			return errors.New("answer without an access key")
		}
		key = AccessKey{ID: aws.ToString(out.AccessKey.AccessKeyId), Created: aws.ToTime(out.AccessKey.CreateDate), Secret: aws.ToString(out.AccessKey.SecretAccessKey)}
		if key.Created.IsZero() {
			key.Created = time.Now()
		}
		return nil
	})
	return key, err
}

func (c *client) DeleteKey(ctx context.Context, user, keyID string) error {
	err := c.call(ctx, "DeleteAccessKey", user, func(ctx context.Context) error {
		_, err := c.api.DeleteAccessKey(ctx, &awsiam.DeleteAccessKeyInput{UserName: aws.String(user), AccessKeyId: aws.String(keyID)})
		return err
	})
	return goneIsDone(err)
}

// goneIsDone: deleting what is not there (NoSuchEntity) has done its work.
func goneIsDone(err error) error {
	if KindOf(err) == KindNoSuchEntity {
		return nil
	}
	return err
}

func (c *client) DeleteUser(ctx context.Context, user string) error {
	keys, err := c.ListKeys(ctx, user)
	if KindOf(err) == KindNoSuchEntity {
		return nil
	}
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := c.DeleteKey(ctx, user, k.ID); err != nil {
			return err
		}
	}
	if err := c.DeletePolicy(ctx, user); err != nil {
		return err
	}
	err = c.call(ctx, "DeleteUser", user, func(ctx context.Context) error {
		_, err := c.api.DeleteUser(ctx, &awsiam.DeleteUserInput{UserName: aws.String(user)})
		return err
	})
	return goneIsDone(err)
}

func (c *client) ListUsers(ctx context.Context, marker string, limit int) (UserPage, error) {
	var page UserPage
	err := c.call(ctx, "ListUsers", "", func(ctx context.Context) error {
		in := &awsiam.ListUsersInput{MaxItems: aws.Int32(int32(min(max(limit, 1), 1000)))}
		if marker != "" {
			in.Marker = aws.String(marker)
		}
		out, err := c.api.ListUsers(ctx, in)
		if err != nil {
			return err
		}
		page = UserPage{}
		for _, u := range out.Users {
			page.Names = append(page.Names, aws.ToString(u.UserName))
		}
		// A server that says "truncated" without a marker would send the same page
		// forever: its answer is taken as the last page.
		if out.IsTruncated && aws.ToString(out.Marker) != "" && aws.ToString(out.Marker) != marker {
			page.Next = aws.ToString(out.Marker)
		}
		return nil
	})
	return page, err
}

// ListUserNames lists every user name (all pages). The operator does not need
// it; tests use it to prove a teardown left nothing behind.
func ListUserNames(ctx context.Context, d Driver) ([]string, error) {
	var names []string
	marker := ""
	for {
		page, err := d.ListUsers(ctx, marker, 1000)
		if err != nil {
			return nil, err
		}
		names = append(names, page.Names...)
		if page.Next == "" {
			return names, nil
		}
		marker = page.Next
	}
}
