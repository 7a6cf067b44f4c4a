package mover

import (
	"time"
)

// Progress is one pass of a move as its shards' checkpoints tell it: what the
// controller writes into the StorageBucket's status and its metrics.
type Progress struct {
	Pass int  `json:"pass"`
	Mode Mode `json:"mode"`
	// Shards is how many shards the pass has; Done how many of them finished it.
	Shards int `json:"shards"`
	Done   int `json:"done"`
	// Counts and Moved are the shards' summed (see Checkpoint).
	Counts      Counts   `json:"counts"`
	Moved       Moved    `json:"moved"`
	Failures    Failures `json:"failures,omitempty"`
	Differences Failures `json:"differences,omitempty"`
	// Verified: every shard finished a verifying pass with no difference and no
	// failure. The only state that allows a cutover.
	Verified bool `json:"verified"`
	// Plan is the plan pass's result, when there was one.
	Plan *Plan `json:"plan,omitempty"`
	// BytesPerSecond is the rate of this pass so far; Remaining the time left at
	// that rate for what the plan (or the listing) says is left; zero when unknown.
	BytesPerSecond float64       `json:"bytesPerSecond"`
	Remaining      time.Duration `json:"remaining"`
	// Errors are the shards' last errors, for a run that stopped early.
	Errors []string `json:"errors,omitempty"`
}

// Summarize reads pass of a move of shards shards from its checkpoints (the plan's
// among them, if any). A shard without a checkpoint of this pass counts as not done.
func Summarize(cps []*Checkpoint, pass, shards int, now time.Time) Progress {
	p := Progress{Pass: pass, Shards: shards}
	var started, updated time.Time
	verified := 0
	for _, cp := range cps {
		if cp.Shard == PlanShard {
			p.Plan = cp.Plan
			if shards == 0 || cp.Pass != pass {
				continue
			}
		}
		if cp.Pass != pass {
			continue
		}
		p.Mode = cp.Mode
		if cp.Phase == PhaseDone {
			p.Done++
		}
		if cp.Verified {
			verified++
		}
		c := &p.Counts
		c.ListedObjects += cp.Counts.ListedObjects
		c.ListedBytes += cp.Counts.ListedBytes
		c.CopiedObjects += cp.Counts.CopiedObjects
		c.CopiedBytes += cp.Counts.CopiedBytes
		c.UnchangedObjects += cp.Counts.UnchangedObjects
		c.UnchangedBytes += cp.Counts.UnchangedBytes
		c.Deleted += cp.Counts.Deleted
		c.Changed += cp.Counts.Changed
		c.Locked += cp.Counts.Locked
		p.Moved.Objects += cp.Moved.Objects
		p.Moved.Bytes += cp.Moved.Bytes
		p.Moved.WrittenBytes += cp.Moved.WrittenBytes
		merge(&p.Failures, cp.Failures)
		merge(&p.Differences, cp.Differences)
		if cp.LastError != "" && cp.Phase != PhaseDone {
			p.Errors = append(p.Errors, cp.LastError)
		}
		if started.IsZero() || cp.Started.Before(started) {
			started = cp.Started
		}
		if cp.Updated.After(updated) {
			updated = cp.Updated
		}
	}
	p.Verified = shards > 0 && verified == shards && p.Done == shards
	if p.Done < shards {
		updated = now
	}
	if secs := updated.Sub(started).Seconds(); secs > 0 {
		p.BytesPerSecond = float64(p.Counts.CopiedBytes) / secs
	}
	total := p.Counts.ListedBytes
	if p.Plan != nil && p.Plan.Bytes > total {
		total = p.Plan.Bytes
	}
	if left := total - p.Counts.CopiedBytes - p.Counts.UnchangedBytes; left > 0 && p.BytesPerSecond > 0 && p.Done < shards {
		p.Remaining = time.Duration(float64(left) / p.BytesPerSecond * float64(time.Second))
	}
	return p
}

func merge(into *Failures, f Failures) {
	into.Count += f.Count
	for _, x := range f.First {
		if len(into.First) < MaxFailuresListed {
			into.First = append(into.First, x)
		}
	}
}
