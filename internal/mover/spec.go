package mover

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// Spec is one pass of one move, everything a mover needs but the stores' credentials
// (Credentials), which never travel with it: a Spec is written into a ConfigMap and
// onto a Job, a Secret holds the keys.
type Spec struct {
	// MoveID names the move and its checkpoints (checkpoint.go): a DNS label of at
	// most MaxMoveIDLength characters. The controller uses the StorageBucket's UID, so
	// that a claim deleted and made again starts a move of its own.
	MoveID string `json:"moveID"`
	Source Bucket `json:"source"`
	Target Bucket `json:"target"`
	// Versions is what is copied of each key: VersionsCurrent (the default) its
	// current version, VersionsAll every version and delete marker in order.
	Versions VersionsMode `json:"versions,omitempty"`
	// Mode is what this pass does (see Mode).
	Mode Mode `json:"mode"`
	// Pass numbers the passes of a move from 1. A shard resumes its checkpoint only
	// for the same pass; a higher number starts a new pass over what the last one
	// left.
	Pass int `json:"pass"`
	// Shards is how many shards a ModePlan pass plans for; the other modes take the
	// shards from Boundaries.
	Shards int `json:"shards,omitempty"`
	// Boundaries split the key space into len(Boundaries)+1 shards: shard i holds the
	// keys after Boundaries[i-1] up to and including Boundaries[i] (the first starts
	// at the first key, the last ends with the last). Strictly increasing; every
	// version of a key is in the key's shard.
	Boundaries []string `json:"boundaries,omitempty"`
	// Parallelism is the most shards of the pass that run at once: the store admins'
	// bound (zero: every shard at once, or the runner's own bound).
	Parallelism int    `json:"parallelism,omitempty"`
	Limits      Limits `json:"limits,omitempty"`
	// ObjectLock, set for a bucket with object lock, moves every version with what
	// locks it, within the target's rules (lock.go). The target bucket must have
	// object lock.
	ObjectLock *LockRules `json:"objectLock,omitempty"`
}

// Bucket is one side of a move: a bucket on a store and how to reach it.
type Bucket struct {
	Endpoint              string `json:"endpoint,omitempty"` // empty: AWS, resolved from Region
	Region                string `json:"region,omitempty"`
	ForcePathStyle        bool   `json:"forcePathStyle,omitempty"`
	CABundle              string `json:"caBundle,omitempty"`
	InsecureSkipTLSVerify bool   `json:"insecureSkipTLSVerify,omitempty"`
	Bucket                string `json:"bucket"`
	// RequestsPerSecond and Burst are the move's share of the store's request budget
	// (zero: unlimited), which every shard of a pass shares: the in-process runner
	// runs them on one token bucket, the Jobs runner divides it among the pods that
	// run at once.
	RequestsPerSecond float64 `json:"requestsPerSecond,omitempty"`
	Burst             int     `json:"burst,omitempty"`
	// SendsTagCount says the store answers a GET of a tagged object with
	// x-amz-tagging-count (AWS, SeaweedFS, Versity and RGW do), so an answer without it
	// means no tags and saves a GetObjectTagging per object. Unset, the mover asks
	// for every object's tags until the store has sent the header once.
	SendsTagCount bool `json:"sendsTagCount,omitempty"`
}

// VersionsMode says which versions of each key a move copies.
type VersionsMode string

const (
	// VersionsCurrent copies the current version of each key (none for a key whose
	// current version is a delete marker).
	VersionsCurrent VersionsMode = "Current"
	// VersionsAll copies every version and delete marker of each key, oldest first,
	// so the target's history reads as the source's (with new version IDs: S3 lets
	// no one choose them). The target must have versioning enabled.
	VersionsAll VersionsMode = "All"
)

// Mode is what one pass does.
type Mode string

const (
	// ModePlan lists the source once and records its totals and the boundaries
	// that split it into Spec.Shards shards of about equal work.
	ModePlan Mode = "Plan"
	// ModeCopy makes the target's shard equal to the source's as listed: it copies
	// what is missing or different and deletes what the source no longer has. Run
	// again while the source takes writes, each pass copies the delta since the last.
	ModeCopy Mode = "Copy"
	// ModeFinal is a copy pass followed by a verifying one, meant for a source whose
	// writes are stopped: its result says whether the shard is verified equal.
	ModeFinal Mode = "Final"
	// ModeVerify lists both sides and counts the differences, writing nothing.
	ModeVerify Mode = "Verify"
)

// Limits bound what one mover process uses. Zero fields take the defaults of package
// defaults (MoverConcurrency, ...). A mover holds at most Concurrency objects of at
// most SmallObject bytes in memory, and streams everything larger through
// fixed 32 KiB buffers (see doc.go for the whole figure).
type Limits struct {
	// Concurrency is how many transfers (objects, or parts of large ones) run at
	// once.
	Concurrency int `json:"concurrency,omitempty"`
	// SmallObject is the largest object read into memory and written with a signed
	// body; larger ones are streamed.
	SmallObject int64 `json:"smallObject,omitempty"`
	// PartSize is the part size of objects the mover lays out itself (a single-part
	// object larger than StreamLimit, or a multipart one whose layout the source
	// does not tell). Parts are streamed, never held.
	PartSize int64 `json:"partSize,omitempty"`
	// StreamLimit is the largest single-part object copied as one streamed write,
	// which keeps its ETag (the MD5 of its bytes); a larger one is copied in parts,
	// so that a mover killed in its middle resumes from its last part.
	StreamLimit int64 `json:"streamLimit,omitempty"`
	// RequestTimeout bounds every call to a store; streamed calls get their bytes at
	// 1 MiB/s on top.
	RequestTimeout Duration `json:"requestTimeout,omitempty"`
	// CheckpointInterval is how often progress is written to the checkpoint.
	CheckpointInterval Duration `json:"checkpointInterval,omitempty"`
	// MaxFailures ends a pass early once this many keys could not be copied: so many
	// failures mean something is wrong with the move, not with some objects.
	MaxFailures int64 `json:"maxFailures,omitempty"`
}

// Duration is a time.Duration written as Go writes durations ("5s") in JSON.
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	d.Duration = v
	return err
}

// MaxMoveIDLength keeps checkpoint names ("bucketkeeper-move-<id>-<shard>") far
// within Kubernetes' 253 characters, and room for label values (63).
const MaxMoveIDLength = 40

var moveIDPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// WithDefaults returns the limits with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.Concurrency <= 0 {
		l.Concurrency = defaults.MoverConcurrency
	}
	if l.SmallObject <= 0 {
		l.SmallObject = defaults.MoverSmallObject
	}
	if l.PartSize <= 0 {
		l.PartSize = defaults.MoverPartSize
	}
	if l.StreamLimit <= 0 {
		l.StreamLimit = defaults.MoverStreamLimit
	}
	if l.RequestTimeout.Duration <= 0 {
		l.RequestTimeout.Duration = defaults.S3RequestTimeout
	}
	if l.CheckpointInterval.Duration <= 0 {
		l.CheckpointInterval.Duration = defaults.MoverCheckpointInterval
	}
	if l.MaxFailures <= 0 {
		l.MaxFailures = defaults.MoverMaxFailures
	}
	return l
}

// S3's bounds on multipart uploads.
const (
	minPartSize = 5 << 20
	maxParts    = 10000
)

// Validate refuses a spec no pass could run, with the field at fault.
func (s *Spec) Validate() error {
	var errs []error
	if len(s.MoveID) > MaxMoveIDLength || !moveIDPattern.MatchString(s.MoveID) {
		errs = append(errs, fmt.Errorf("moveID %q must be a DNS label of at most %d characters", s.MoveID, MaxMoveIDLength))
	}
	if s.Source.Bucket == "" || s.Target.Bucket == "" {
		errs = append(errs, errors.New("source.bucket and target.bucket must be set"))
	}
	if s.Source == s.Target {
		errs = append(errs, errors.New("source and target are the same bucket of the same store"))
	}
	switch s.Versions {
	case "", VersionsCurrent, VersionsAll:
	default:
		errs = append(errs, fmt.Errorf("versions %q must be %s or %s", s.Versions, VersionsCurrent, VersionsAll))
	}
	switch s.Mode {
	case ModePlan:
		if s.Shards < 1 {
			errs = append(errs, fmt.Errorf("a %s pass needs shards of at least 1, not %d", ModePlan, s.Shards))
		}
	case ModeCopy, ModeFinal, ModeVerify:
	default:
		errs = append(errs, fmt.Errorf("mode %q must be one of %s, %s, %s, %s", s.Mode, ModePlan, ModeCopy, ModeFinal, ModeVerify))
	}
	if s.Pass < 1 {
		errs = append(errs, fmt.Errorf("pass must be at least 1, not %d", s.Pass))
	}
	if s.Parallelism < 0 {
		errs = append(errs, fmt.Errorf("parallelism must not be negative, not %d", s.Parallelism))
	}
	if !slices.IsSorted(s.Boundaries) || len(slices.Compact(slices.Clone(s.Boundaries))) != len(s.Boundaries) {
		errs = append(errs, errors.New("boundaries must be strictly increasing"))
	}
	if l := s.ObjectLock; l != nil {
		for _, m := range l.AllowedModes {
			if m != s3.RetentionGovernance && m != s3.RetentionCompliance {
				errs = append(errs, fmt.Errorf("objectLock.allowedModes: %q is no retention mode", m))
			}
		}
		if l.MaxRetentionDays < 0 {
			errs = append(errs, fmt.Errorf("objectLock.maxRetentionDays must not be negative, not %d", l.MaxRetentionDays))
		}
	}
	if l := s.Limits; l.PartSize != 0 && l.PartSize < minPartSize {
		errs = append(errs, fmt.Errorf("limits.partSize %d is below S3's smallest part (%d)", l.PartSize, minPartSize))
	}
	return errors.Join(errs...)
}

// ShardCount is how many shards the spec's boundaries make.
func (s *Spec) ShardCount() int { return len(s.Boundaries) + 1 }

// Range is shard i's part of the key space: keys after After up to and including
// Last; Last "" means no end.
func (s *Spec) Range(shard int) (KeyRange, error) {
	if shard < 0 || shard >= s.ShardCount() {
		return KeyRange{}, fmt.Errorf("shard %d of a move with %d shards", shard, s.ShardCount())
	}
	var r KeyRange
	if shard > 0 {
		r.After = s.Boundaries[shard-1]
	}
	if shard < len(s.Boundaries) {
		r.Last = s.Boundaries[shard]
	}
	return r, nil
}

// KeyRange is the keys after After up to and including Last ("": no end).
type KeyRange struct{ After, Last string }

// Contains says whether key is in the range.
func (r KeyRange) Contains(key string) bool {
	return key > r.After && (r.Last == "" || key <= r.Last)
}

// Beyond says whether key lies past the range's end.
func (r KeyRange) Beyond(key string) bool { return r.Last != "" && key > r.Last }

// ReadSpecFile reads a spec written as JSON (the Job mounts it from a ConfigMap).
func ReadSpecFile(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

// MemoryBound is the heap a mover with limits l works in (doc.go's figure): 32 MiB
// for the runtime, the clients and the listings, and per transfer its object buffer
// and its stream's buffers. The mover subcommand sets it as the runtime's soft limit.
func MemoryBound(l Limits) int64 {
	l = l.WithDefaults()
	return 32<<20 + int64(l.Concurrency)*(l.SmallObject+256<<10)
}
