package s3

import (
	"context"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3 Object Lock: a bucket created with it keeps every version, and a version under a
// retention or a legal hold cannot be deleted until it ends (a plain DELETE only adds a
// delete marker). The operator sets a bucket's default retention and reads what locks a
// version when a purge cannot delete it. Only a move sets a version's lock: it writes
// each version with the source's (ObjectMeta.Lock), and lengthens a retention or turns
// a legal hold on or off in place where the source's changed after the copy.

// RetentionMode is an object lock retention mode as S3 names it.
type RetentionMode string

// Retention modes. Governance may be lifted by an identity with
// s3:BypassGovernanceRetention that asks for it; Compliance by nobody.
const (
	RetentionGovernance RetentionMode = "GOVERNANCE"
	RetentionCompliance RetentionMode = "COMPLIANCE"
)

// DefaultRetention is a bucket's default retention: a mode and one of Days or Years.
type DefaultRetention struct {
	Mode  RetentionMode
	Days  int32
	Years int32
}

// ObjectLockConfig is a bucket's object lock configuration.
type ObjectLockConfig struct {
	// Enabled: the bucket has object lock (it cannot be turned off again).
	Enabled bool
	// DefaultRetention is nil when the bucket has none.
	DefaultRetention *DefaultRetention
}

// ObjectRetention is the retention of one object version; Mode "" when it has none.
type ObjectRetention struct {
	Mode  RetentionMode
	Until time.Time
}

// ObjectLock is what locks one object version: a retention (Mode "" for none) until
// RetainUntil, and a legal hold.
type ObjectLock struct {
	Mode        RetentionMode
	RetainUntil time.Time
	LegalHold   bool
}

// IsZero says nothing locks the version.
func (l ObjectLock) IsZero() bool { return l.Mode == "" && !l.LegalHold }

// String says the lock as a message names it: "COMPLIANCE until 2026-01-02T03:04:05Z,
// legal hold".
func (l ObjectLock) String() string {
	var parts []string
	if l.Mode != "" {
		parts = append(parts, string(l.Mode)+" until "+l.RetainUntil.UTC().Format(time.RFC3339))
	}
	if l.LegalHold {
		parts = append(parts, "legal hold")
	}
	if len(parts) == 0 {
		return "no lock"
	}
	return strings.Join(parts, ", ")
}

// headers are the lock as a write's x-amz-object-lock-* headers (zero values: none).
func (l ObjectLock) headers() (types.ObjectLockMode, *time.Time, types.ObjectLockLegalHoldStatus) {
	var mode types.ObjectLockMode
	var until *time.Time
	if l.Mode != "" {
		mode, until = types.ObjectLockMode(l.Mode), aws.Time(l.RetainUntil)
	}
	var hold types.ObjectLockLegalHoldStatus
	if l.LegalHold {
		hold = types.ObjectLockLegalHoldStatusOn
	}
	return mode, until, hold
}

// lockOfHeaders reads the lock a GET or HEAD answered; a retention without a date is
// none.
func lockOfHeaders(mode string, until *time.Time, hold types.ObjectLockLegalHoldStatus) ObjectLock {
	l := ObjectLock{LegalHold: hold == types.ObjectLockLegalHoldStatusOn}
	if mode != "" && until != nil {
		l.Mode, l.RetainUntil = RetentionMode(mode), *until
	}
	return l
}

// noLockConfigCodes are the answers that mean "no object lock configuration here": a
// bucket without object lock (AWS, SeaweedFS and Ceph RGW say
// ObjectLockConfigurationNotFoundError) or a version without a retention or legal hold
// (AWS and Versity say NoSuchObjectLockConfiguration, Versity with status 400).
// SeaweedFS answers a version without a legal hold NoSuchObjectLegalHold.
var noLockConfigCodes = []string{"ObjectLockConfigurationNotFoundError", "NoSuchObjectLockConfiguration", "NoSuchObjectLegalHold"}

// CreateBucketWithObjectLock creates bucket with object lock enabled, which turns its
// versioning on. Its answers are CreateBucket's.
func (c *client) CreateBucketWithObjectLock(ctx context.Context, bucket, region string) error {
	in := createBucketInput(bucket, region)
	in.ObjectLockEnabledForBucket = aws.Bool(true)
	return c.createBucket(ctx, in)
}

func (c *client) GetObjectLockConfiguration(ctx context.Context, bucket string) (ObjectLockConfig, error) {
	var cfg ObjectLockConfig
	err := c.call(ctx, "GetObjectLockConfiguration", bucket, "", func(ctx context.Context) error {
		out, err := c.api.GetObjectLockConfiguration(ctx, &awss3.GetObjectLockConfigurationInput{Bucket: aws.String(bucket)})
		if err != nil {
			if hasCode(err, noLockConfigCodes...) {
				return nil
			}
			return err
		}
		cfg = lockConfigOf(out.ObjectLockConfiguration)
		return nil
	})
	return cfg, err
}

// lockConfigOf reads a store's answer. Versity answers a bucket without a default
// retention with an empty Rule, the others with none; a retention without a period (which
// Versity accepts) is no retention either.
func lockConfigOf(in *types.ObjectLockConfiguration) ObjectLockConfig {
	var cfg ObjectLockConfig
	if in == nil {
		return cfg
	}
	cfg.Enabled = in.ObjectLockEnabled == types.ObjectLockEnabledEnabled
	if in.Rule == nil || in.Rule.DefaultRetention == nil {
		return cfg
	}
	d := in.Rule.DefaultRetention
	r := &DefaultRetention{Mode: RetentionMode(d.Mode), Days: aws.ToInt32(d.Days), Years: aws.ToInt32(d.Years)}
	if r.Days > 0 || r.Years > 0 {
		cfg.DefaultRetention = r
	}
	return cfg
}

// PutObjectLockConfiguration replaces the bucket's object lock configuration: it turns
// object lock on for a bucket without it where the store can (versioning must be
// Enabled), and sets or, with a nil DefaultRetention, removes the default retention.
// Object lock cannot be turned off: Enabled false is KindInvalid, sent nowhere.
func (c *client) PutObjectLockConfiguration(ctx context.Context, bucket string, cfg ObjectLockConfig) error {
	if !cfg.Enabled {
		return invalid("PutObjectLockConfiguration", bucket, "object lock cannot be turned off")
	}
	in := &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled}
	if r := cfg.DefaultRetention; r != nil {
		if (r.Days > 0) == (r.Years > 0) || (r.Mode != RetentionGovernance && r.Mode != RetentionCompliance) {
			return invalid("PutObjectLockConfiguration", bucket, "a default retention needs a mode and exactly one of days or years")
		}
		d := &types.DefaultRetention{Mode: types.ObjectLockRetentionMode(r.Mode)}
		if r.Days > 0 {
			d.Days = aws.Int32(r.Days)
		} else {
			d.Years = aws.Int32(r.Years)
		}
		in.Rule = &types.ObjectLockRule{DefaultRetention: d}
	}
	return c.call(ctx, "PutObjectLockConfiguration", bucket, "", func(ctx context.Context) error {
		_, err := c.api.PutObjectLockConfiguration(ctx, &awss3.PutObjectLockConfigurationInput{Bucket: aws.String(bucket), ObjectLockConfiguration: in})
		return err
	})
}

func (c *client) GetObjectRetention(ctx context.Context, bucket, key, versionID string) (ObjectRetention, error) {
	var ret ObjectRetention
	err := c.call(ctx, "GetObjectRetention", bucket, key, func(ctx context.Context) error {
		out, err := c.api.GetObjectRetention(ctx, &awss3.GetObjectRetentionInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: nonEmpty(versionID)})
		if err != nil {
			if hasCode(err, noLockConfigCodes...) {
				return nil
			}
			return err
		}
		if r := out.Retention; r != nil {
			ret = ObjectRetention{Mode: RetentionMode(r.Mode), Until: aws.ToTime(r.RetainUntilDate)}
		}
		return nil
	})
	return ret, err
}

func (c *client) GetObjectLegalHold(ctx context.Context, bucket, key, versionID string) (bool, error) {
	on := false
	err := c.call(ctx, "GetObjectLegalHold", bucket, key, func(ctx context.Context) error {
		out, err := c.api.GetObjectLegalHold(ctx, &awss3.GetObjectLegalHoldInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: nonEmpty(versionID)})
		if err != nil {
			if hasCode(err, noLockConfigCodes...) {
				return nil
			}
			return err
		}
		on = out.LegalHold != nil && out.LegalHold.Status == types.ObjectLockLegalHoldStatusOn
		return nil
	})
	return on, err
}

// PutObjectRetention sets a version's retention. bypassGovernance sends
// x-amz-bypass-governance-retention, which a store asks for to change a Governance
// retention other than by lengthening it (to Compliance, for one).
func (c *client) PutObjectRetention(ctx context.Context, bucket, key, versionID string, r ObjectRetention, bypassGovernance bool) error {
	if r.Mode != RetentionGovernance && r.Mode != RetentionCompliance {
		return invalid("PutObjectRetention", bucket, "a retention needs a mode")
	}
	return c.call(ctx, "PutObjectRetention", bucket, key, func(ctx context.Context) error {
		in := &awss3.PutObjectRetentionInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: nonEmpty(versionID),
			Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionMode(r.Mode), RetainUntilDate: aws.Time(r.Until)}}
		if bypassGovernance {
			in.BypassGovernanceRetention = aws.Bool(true)
		}
		_, err := c.api.PutObjectRetention(ctx, in)
		return err
	})
}

// PutObjectLegalHold turns a version's legal hold on or off.
func (c *client) PutObjectLegalHold(ctx context.Context, bucket, key, versionID string, on bool) error {
	status := types.ObjectLockLegalHoldStatusOff
	if on {
		status = types.ObjectLockLegalHoldStatusOn
	}
	return c.call(ctx, "PutObjectLegalHold", bucket, key, func(ctx context.Context) error {
		_, err := c.api.PutObjectLegalHold(ctx, &awss3.PutObjectLegalHoldInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: nonEmpty(versionID),
			LegalHold: &types.ObjectLockLegalHold{Status: status}})
		return err
	})
}

// DeleteObjectsBypassingGovernance is DeleteObjects with x-amz-bypass-governance-retention:
// versions locked in Governance mode are deleted too, where the caller holds
// s3:BypassGovernanceRetention. Compliance retentions and legal holds still refuse.
func (c *client) DeleteObjectsBypassingGovernance(ctx context.Context, bucket string, objects []ObjectID) error {
	return c.deleteObjects(ctx, bucket, objects, true)
}

// Kind classifies one key's failure as KindOf classifies a whole call's: a purge tells
// the versions an object lock keeps (AccessDenied) from other refusals by it.
func (e ObjectError) Kind() Kind { return codeKinds[e.Code] }

// minioLocked is the message of MinIO's refusal of a locked version (its code,
// InvalidRequest, says no more).
const minioLocked = "Object is WORM protected"

// MayBeLock says whether a key's failure is how stores refuse a version an object lock
// keeps: AccessDenied (AWS, SeaweedFS, Versity, Ceph RGW), or MinIO's InvalidRequest
// "Object is WORM protected and cannot be overwritten". AccessDenied may have another
// cause, so a purge reads a version's lock before it counts one.
func (e ObjectError) MayBeLock() bool {
	return e.Kind() == KindAccessDenied || (e.Code == "InvalidRequest" && strings.HasPrefix(e.Message, minioLocked))
}
