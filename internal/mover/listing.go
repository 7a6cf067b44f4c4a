package mover

import (
	"context"
	"slices"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// keyGroup is one key of a listing: its current object, or (VersionsAll) its whole
// history, oldest first.
type keyGroup struct {
	key     string
	entries []s3.ObjectEntry
}

// size is the bytes the group's entries hold.
func (g keyGroup) size() int64 {
	var n int64
	for _, e := range g.entries {
		n += e.Size
	}
	return n
}

// maxVersionsPerKey bounds the history of one key a mover holds (about 200 bytes
// each): a key with more versions fails instead of growing the mover without bound.
const maxVersionsPerKey = 100000

// lister walks one bucket's keys in a key range, a page ahead of its reader, in key
// groups. Its memory is two pages (at most 2,000 entries) and the key it is on.
type lister struct {
	pages chan listedPage
	page  []s3.ObjectEntry
	err   error
	done  bool
	// versions: group every version of a key (VersionsAll).
	versions bool
}

type listedPage struct {
	entries []s3.ObjectEntry
	err     error
}

// listRange starts listing bucket's keys in r after from (a resumed pass's cursor,
// or r.After). A listing error that retrying cannot fix ends the listing; transient
// ones are retried (retry.go) for as long as ctx lasts.
func listRange(ctx context.Context, c s3.Client, bucket string, versions bool, r KeyRange, from string) *lister {
	l := &lister{pages: make(chan listedPage, 1), versions: versions}
	go func() {
		defer close(l.pages)
		opts := s3.RangeOptions{StartAfter: max(from, r.After), Versions: versions}
		var token *s3.PageToken
		for {
			var page s3.EntryPage
			err := retryTransient(ctx, func() error {
				var err error
				page, err = c.ListRange(ctx, bucket, opts, token)
				return err
			})
			if err != nil {
				l.send(ctx, listedPage{err: err})
				return
			}
			// S3 lists keys after a key-marker, yet a version listing of SeaweedFS
			// starts with the marker's own versions: they belong to the shard before.
			entries := page.Entries
			for len(entries) > 0 && opts.StartAfter != "" && entries[0].Key <= opts.StartAfter {
				entries = entries[1:]
			}
			end := false
			if i := slices.IndexFunc(entries, func(e s3.ObjectEntry) bool { return r.Beyond(e.Key) }); i >= 0 {
				entries, end = entries[:i], true
			}
			if !l.send(ctx, listedPage{entries: entries}) || end || page.Next == nil {
				return
			}
			token = page.Next
		}
	}()
	return l
}

func (l *lister) send(ctx context.Context, p listedPage) bool {
	select {
	case l.pages <- p:
		return true
	case <-ctx.Done():
		return false
	}
}

// entry returns the next entry, false at the end (or on an error, see err).
func (l *lister) entry() (s3.ObjectEntry, bool) {
	for len(l.page) == 0 {
		if l.done {
			return s3.ObjectEntry{}, false
		}
		p, ok := <-l.pages
		if !ok {
			l.done = true
			return s3.ObjectEntry{}, false
		}
		if p.err != nil {
			l.err, l.done = p.err, true
			return s3.ObjectEntry{}, false
		}
		l.page = p.entries
	}
	e := l.page[0]
	l.page = l.page[1:]
	return e, true
}

// peekKey is the key of the next entry without taking it, false at the end.
func (l *lister) peekKey() (string, bool) {
	for len(l.page) == 0 {
		if l.done {
			return "", false
		}
		p, ok := <-l.pages
		if !ok {
			l.done = true
			return "", false
		}
		if p.err != nil {
			l.err, l.done = p.err, true
			return "", false
		}
		l.page = p.entries
	}
	return l.page[0].Key, true
}

// next returns the next key group; false at the end of the range or on an error
// (l.err). A group of VersionsAll holds the key's versions and delete markers oldest
// first; one of VersionsCurrent its current object.
func (l *lister) next() (keyGroup, bool) {
	e, ok := l.entry()
	if !ok {
		return keyGroup{}, false
	}
	g := keyGroup{key: e.Key, entries: []s3.ObjectEntry{e}}
	if !l.versions {
		return g, true
	}
	for {
		k, ok := l.peekKey()
		if !ok || k != g.key {
			break
		}
		e, _ := l.entry()
		if len(g.entries) >= maxVersionsPerKey {
			l.err = &tooManyVersions{key: g.key}
			return keyGroup{}, false
		}
		g.entries = append(g.entries, e)
	}
	if l.err != nil {
		return keyGroup{}, false
	}
	slices.Reverse(g.entries) // the stores list newest first
	return g, true
}

type tooManyVersions struct{ key string }

func (e *tooManyVersions) Error() string {
	return "key " + quoteKey(e.key) + " has more versions than a mover holds at once"
}
