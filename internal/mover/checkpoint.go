package mover

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Checkpoint is what one shard of a move has done, written by its mover while it runs
// (every Limits.CheckpointInterval, at once when a multipart upload starts, and when
// a pass ends) and read by the controller for status, and by the next mover of the
// same shard to resume.
//
// It is small on purpose: what has been verified is not recorded per object, it is
// derived from listing both stores (an object is verified when the target lists it
// with the source's size and ETag, or with the ETag an Equivalence recorded after a
// copy whose bytes were checked). So a resumed mover re-copies nothing that is
// verified, whatever it lost, and the checkpoint only saves work: the cursor saves
// listing, the uploads save the parts of large objects in flight.
type Checkpoint struct {
	MoveID string `json:"moveID"`
	// Shard is the shard's index, PlanShard for the plan.
	Shard int   `json:"shard"`
	Pass  int   `json:"pass"`
	Mode  Mode  `json:"mode"`
	Phase Phase `json:"phase"`
	// Cursor: every key up to and including it is done in this pass.
	Cursor string `json:"cursor,omitempty"`
	// Writer names the mover process that wrote this version (pod name and a
	// random suffix), so that a superseded mover stops instead of writing over its
	// successor.
	Writer string `json:"writer,omitempty"`
	Runs   int    `json:"runs"` // movers that started this pass: 1 unless one died or failed
	// RunStarted is when the writer started; Started when the pass did.
	RunStarted time.Time  `json:"runStarted"`
	Started    time.Time  `json:"started"`
	Updated    time.Time  `json:"updated"`
	Finished   *time.Time `json:"finished,omitempty"`
	// Counts are this pass's; Moved sums what every pass of the move wrote.
	Counts Counts `json:"counts"`
	Moved  Moved  `json:"moved"`
	// Failures are the keys this pass could not copy: the move must not cut over.
	Failures Failures `json:"failures,omitempty"`
	// Differences are what the verifying listing found unequal (ModeFinal, ModeVerify).
	Differences Failures `json:"differences,omitempty"`
	// Verified: the verifying listing found the shard's keys equal on both sides,
	// and no key failed. Only a ModeFinal or ModeVerify pass sets it.
	Verified bool `json:"verified,omitempty"`
	// Uploads are the multipart uploads in flight on the target, resumed by the next
	// mover of the shard (their parts are read from the target).
	Uploads []Upload `json:"uploads,omitempty"`
	// Plan is the plan pass's result (PlanShard only).
	Plan *Plan `json:"plan,omitempty"`
	// LastError is why the last run of this pass stopped early, if it did, in the
	// words a tenant may read (reason): the mover's log has the whole error.
	LastError string `json:"lastError,omitempty"`

	// equivalent holds the ETag equivalences (equivalence.go); stored beside the
	// JSON, as binary.
	equivalent *equivalences
}

// PlanShard is the Shard of the plan's checkpoint.
const PlanShard = -1

// Phase is where a shard's pass is.
type Phase string

// The phases of a pass.
const (
	PhaseCopying   Phase = "Copying"
	PhaseVerifying Phase = "Verifying"
	PhaseDone      Phase = "Done"
)

// Counts are one pass's figures for its shard.
type Counts struct {
	// Listed: the source's objects (versions and delete markers with VersionsAll)
	// and bytes in the shard, as this pass listed them.
	ListedObjects int64 `json:"listedObjects"`
	ListedBytes   int64 `json:"listedBytes"`
	// Copied: written to the target in this pass.
	CopiedObjects int64 `json:"copiedObjects"`
	CopiedBytes   int64 `json:"copiedBytes"`
	// Unchanged: already equal on the target.
	UnchangedObjects int64 `json:"unchangedObjects"`
	UnchangedBytes   int64 `json:"unchangedBytes"`
	// Deleted: removed from the target, as they were from the source.
	Deleted int64 `json:"deleted"`
	// Changed: replaced or deleted on the source while this pass copied them; the
	// next pass copies what they are then.
	Changed int64 `json:"changed"`
	// Locked: versions already on the target whose lock was lengthened, or whose
	// legal hold was turned on or off, to hold them as the source does.
	Locked int64 `json:"locked,omitempty"`
}

// Changes is what the pass had to do: copies, deletions, locks and what changed under
// it. A pass of a source without writes is followed by one with no changes.
func (c Counts) Changes() int64 { return c.CopiedObjects + c.Deleted + c.Changed + c.Locked }

// Moved is what a move wrote to the target over all its passes.
type Moved struct {
	Objects int64 `json:"objects"`
	Bytes   int64 `json:"bytes"`
	// WrittenBytes is every byte sent to the target, parts sent again and writes
	// that failed included: the cost of the move, against the bucket's size.
	WrittenBytes int64 `json:"writtenBytes"`
}

// Failures are keys that could not be copied (or, as Differences, that a verifying
// listing found unequal): how many, and the first few.
type Failures struct {
	Count int64     `json:"count,omitempty"`
	First []Failure `json:"first,omitempty"`
}

// Failure is one key that could not be copied, or differs.
type Failure struct {
	Key       string `json:"key"`
	VersionID string `json:"versionID,omitempty"`
	// Reason says what failed, in words: "source: AccessDenied (HTTP 403)".
	Reason string `json:"reason"`
}

// MaxFailuresListed is how many keys Failures names.
const MaxFailuresListed = 10

func (f *Failures) add(x Failure) {
	f.Count++
	if len(f.First) < MaxFailuresListed {
		f.First = append(f.First, x)
	}
}

func (f Failures) String() string {
	if f.Count == 0 {
		return "none"
	}
	s := fmt.Sprintf("%d, first", f.Count)
	for i, x := range f.First {
		if i > 0 {
			s += ";"
		}
		s += fmt.Sprintf(" %q (%s)", x.Key, x.Reason)
	}
	return s
}

// Upload is a multipart upload a mover started on the target.
type Upload struct {
	Key      string `json:"key"`
	UploadID string `json:"uploadID"`
	// SourceETag and SourceVersionID say what is being copied: a resumed upload is
	// continued only if the source still lists that object.
	SourceETag      string `json:"sourceETag"`
	SourceVersionID string `json:"sourceVersionID,omitempty"`
	Size            int64  `json:"size"`
	// PartSize is the layout's part size (every part but the last has it).
	PartSize int64 `json:"partSize"`
}

// Plan is the result of a plan pass: the source's size and the boundaries that split
// it into shards of about equal work.
type Plan struct {
	Objects    int64    `json:"objects"`
	Bytes      int64    `json:"bytes"`
	Boundaries []string `json:"boundaries,omitempty"`
	// Locks counts the versions a lock holds (Spec.ObjectLock), and LockRefused the
	// versions whose lock the target's rules do not allow: a move with any is refused
	// before anything is created on the target.
	Locks       *LockCounts `json:"locks,omitempty"`
	LockRefused Failures    `json:"lockRefused,omitempty"`
}

// LockCounts are the locked versions a plan found.
type LockCounts struct {
	Retained   int64 `json:"retained,omitempty"`
	Compliance int64 `json:"compliance,omitempty"`
	LegalHolds int64 `json:"legalHolds,omitempty"`
	// LongestUntil is the latest retain-until date among them.
	LongestUntil *time.Time `json:"longestUntil,omitempty"`
}

// Checkpoints keep checkpoints where they survive the mover (checkpoint_configmap.go:
// ConfigMaps in the operator's namespace). Only the shard's mover writes a shard's
// checkpoint.
type Checkpoints interface {
	// Load returns the shard's checkpoint, nil (and no error) when there is none.
	Load(ctx context.Context, moveID string, shard int) (*Checkpoint, error)
	// Save writes cp; ErrSuperseded if a later pass's or another writer's newer
	// checkpoint is there.
	Save(ctx context.Context, cp *Checkpoint) error
	// List returns every checkpoint of the move, the plan's included.
	List(ctx context.Context, moveID string) ([]*Checkpoint, error)
	// Delete removes every checkpoint of the move.
	Delete(ctx context.Context, moveID string) error
}

// ErrSuperseded: another mover took over the shard (a later pass, or a mover started
// after this one for the same pass). The superseded one stops.
var ErrSuperseded = errors.New("the shard's checkpoint was taken over by another mover")
