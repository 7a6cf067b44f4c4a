package mover

import (
	"context"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// A plan pass lists the source once and cuts its key space into shards of about
// equal work, for an Indexed Job whose pods each copy one shard. It keeps a bounded
// sample of the listing (sampler), never the keys themselves, so it runs in the same
// memory whatever the bucket's size.

// objectWeight is what one object costs besides its bytes, in bytes: the requests
// per object (a read, a write, maybe tags) take about as long as moving this much.
const objectWeight = 256 << 10

// sampleCap bounds the sampler: it keeps between sampleCap and 2*sampleCap points.
const sampleCap = 1024

// sampler keeps every step-th key of a listing with the work up to it, doubling step
// (and dropping every other point) whenever it holds 2*sampleCap points.
type sampler struct {
	step, seen int64
	points     []samplePoint
}

type samplePoint struct {
	key    string
	weight int64 // work up to and including key
}

func (sm *sampler) add(key string, weight int64) {
	if sm.step == 0 {
		sm.step = 1
	}
	sm.seen++
	if sm.seen%sm.step != 0 {
		return
	}
	sm.points = append(sm.points, samplePoint{key: key, weight: weight})
	if len(sm.points) >= 2*sampleCap {
		kept := sm.points[:0]
		for i := 1; i < len(sm.points); i += 2 {
			kept = append(kept, sm.points[i])
		}
		sm.points = kept
		sm.step *= 2
	}
}

// boundaries cuts total work into shards parts at the sampled keys nearest the
// equal shares. Fewer come back when the bucket has too few keys to cut; a shard may
// come out empty (a boundary at the last key), which costs its pod a listing.
func (sm *sampler) boundaries(shards int, total int64) []string {
	var out []string
	p := 0
	for i := 1; i < shards; i++ {
		share := total * int64(i) / int64(shards)
		for p < len(sm.points) && sm.points[p].weight < share {
			p++
		}
		if p >= len(sm.points) {
			break
		}
		if k := sm.points[p].key; len(out) == 0 || k > out[len(out)-1] {
			out = append(out, k)
		}
	}
	return out
}

// plan lists the whole source and records its totals and the shard boundaries, and in
// a move of object lock what locks its versions.
func (s *shard) plan(ctx context.Context) error {
	if _, err := s.stores.Source.HeadBucket(ctx, s.spec.Source.Bucket); err != nil {
		return onSource(err)
	}
	versions := s.spec.Versions == VersionsAll
	l := listRange(ctx, s.stores.Source, s.spec.Source.Bucket, versions, KeyRange{}, "")
	var sm sampler
	var p Plan
	var weight int64
	for {
		g, ok := l.next()
		if !ok {
			break
		}
		p.Objects += int64(len(g.entries))
		p.Bytes += g.size()
		if s.spec.ObjectLock != nil {
			if err := s.planLocks(ctx, &p, g); err != nil {
				return err
			}
		}
		weight += g.size() + objectWeight*int64(len(g.entries))
		sm.add(g.key, weight)
		s.update(func(cp *Checkpoint) {
			cp.Cursor = g.key
			cp.Counts.ListedObjects, cp.Counts.ListedBytes = p.Objects, p.Bytes
		})
	}
	if l.err != nil {
		return onSource(l.err)
	}
	p.Boundaries = sm.boundaries(s.spec.Shards, weight)
	s.update(func(cp *Checkpoint) { cp.Plan = &p })
	return nil
}

// planLocks reads what locks each version of a key group (a HEAD each), counts it,
// and records the versions the target's rules refuse, so that the move is refused
// before anything is created on the target.
func (s *shard) planLocks(ctx context.Context, p *Plan, g keyGroup) error {
	if p.Locks == nil {
		p.Locks = &LockCounts{}
	}
	now := s.opts.Now()
	for _, e := range g.entries {
		if e.IsDeleteMarker {
			continue
		}
		l, err := lockOf(ctx, s.stores.Source, s.spec.Source.Bucket, g.key, e.VersionID)
		if changedUnderUs(err) {
			continue // gone since the listing: the copy passes see what is there then
		}
		if err != nil {
			return onSource(err)
		}
		if l.LegalHold {
			p.Locks.LegalHolds++
		}
		if l.Mode != "" && l.RetainUntil.After(now) {
			p.Locks.Retained++
			if l.Mode == s3.RetentionCompliance {
				p.Locks.Compliance++
			}
			if p.Locks.LongestUntil == nil || l.RetainUntil.After(*p.Locks.LongestUntil) {
				until := l.RetainUntil
				p.Locks.LongestUntil = &until
			}
		}
		if err := s.spec.ObjectLock.check(g.key, l, now); err != nil {
			p.LockRefused.add(Failure{Key: g.key, VersionID: e.VersionID, Reason: err.Error()})
		}
	}
	return nil
}
