package quota

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// Limits is a bucket's quota. Zero in a field is no limit; Limits{} is no quota.
type Limits struct {
	MaxBytes   int64
	MaxObjects int64
}

// IsZero says the limits limit nothing.
func (l Limits) IsZero() bool { return l == Limits{} }

func (l Limits) String() string {
	if l.IsZero() {
		return "no quota"
	}
	size, objects := "any size", "any number of objects"
	if l.MaxBytes > 0 {
		size = fmt.Sprintf("%d bytes", l.MaxBytes)
	}
	if l.MaxObjects > 0 {
		objects = fmt.Sprintf("%d objects", l.MaxObjects)
	}
	return size + ", " + objects
}

// Usage is what a bucket holds, as the store counts it.
type Usage struct {
	Bytes   int64
	Objects int64
}

// Client is a store's admin API, as far as quotas go.
type Client interface {
	// Check proves the admin API answers and accepts the operator's admin identity.
	Check(ctx context.Context) error
	// BucketQuota reads the quota the store enforces on bucket (Limits{} for none).
	BucketQuota(ctx context.Context, bucket string) (Limits, error)
	// SetBucketQuota makes limits the bucket's quota; Limits{} removes it.
	SetBucketQuota(ctx context.Context, bucket string, limits Limits) error
	// BucketUsage reads what the bucket holds, from the store's own counters (never
	// by listing the bucket); a NotImplemented *s3.Error where the store has none.
	BucketUsage(ctx context.Context, bucket string) (Usage, error)
	// Enforceable is the part of l the store can enforce, and the name of the limit it
	// cannot ("" when it can enforce all of l).
	Enforceable(l Limits) (Limits, string)
}

// Config is how to reach a store's admin API.
type Config struct {
	Type     bkv1.AdminAPIType
	Endpoint string
	Region   string
	// AccessKeyID and SecretAccessKey are the admin identity's, not the S3 one's.
	AccessKeyID, SecretAccessKey string
	CABundle                     []byte
	InsecureSkipTLSVerify        bool
	// RequestTimeout bounds every call (zero: 30 s; an admin API is never unbounded).
	RequestTimeout time.Duration
	// Limiter, when set, is the store's request budget, which every admin request
	// spends too: tenants' claims cannot send the store more through its admin API
	// than through S3.
	Limiter *rate.Limiter
	// Observer, when set, sees every admin request: its operation and HTTP status (0
	// when no answer came, with the error), so admin calls show in the same request
	// metrics as S3's.
	Observer func(operation string, httpStatus int, err error)
}

// Factory builds a Client; tests swap it.
type Factory func(cfg Config) (Client, error)

// New builds the Client of cfg.Type.
func New(cfg Config) (Client, error) {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = defaultTimeout
	}
	switch cfg.Type {
	case bkv1.AdminAPIRGWAdminOps:
		return newRGW(cfg)
	case bkv1.AdminAPISeaweedFS:
		return newSeaweedFS(cfg)
	default:
		return nil, fmt.Errorf("quota: unknown admin API type %q", cfg.Type)
	}
}

const defaultTimeout = 30 * time.Second
