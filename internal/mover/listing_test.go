package mover

import (
	"context"
	"testing"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// markerEchoingStore lists like SeaweedFS's version listing: from the key-marker
// itself, not after it.
type markerEchoingStore struct {
	s3.Client
	keys []string
}

func (m markerEchoingStore) ListRange(_ context.Context, _ string, opts s3.RangeOptions, _ *s3.PageToken) (s3.EntryPage, error) {
	var page s3.EntryPage
	for _, k := range m.keys {
		if k >= opts.StartAfter {
			page.Entries = append(page.Entries, s3.ObjectEntry{Key: k, VersionID: "v-" + k})
		}
	}
	return page, nil
}

// TestListRangeStartsAfterItsFirstKey: a shard's listing holds only the keys after
// the boundary before it, even from a store that lists the marker's own versions, so
// the key at a boundary belongs to one shard (before, two shards copied and deleted
// its history in turn, forever).
func TestListRangeStartsAfterItsFirstKey(t *testing.T) {
	store := markerEchoingStore{keys: []string{"a", "history", "history", "kept", "z"}}
	l := listRange(context.Background(), store, "b", true, KeyRange{After: "history", Last: "kept"}, "")
	var got []string
	for {
		g, ok := l.next()
		if !ok {
			break
		}
		got = append(got, g.key)
	}
	if l.err != nil || len(got) != 1 || got[0] != "kept" {
		t.Fatalf("listed %v (%v), want only kept", got, l.err)
	}
}
