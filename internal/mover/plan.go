package mover

import (
	"context"
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

// plan lists the whole source and records its totals and the shard boundaries.
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
