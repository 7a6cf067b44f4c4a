package s3

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ObjectEntry is one entry of ListRange: a current object, or one version or delete
// marker of a key.
type ObjectEntry struct {
	Key            string
	VersionID      string // "" in a listing of current objects
	IsDeleteMarker bool
	IsLatest       bool
	Size           int64
	ETag           string // without quotes; "" for a delete marker
	LastModified   time.Time
}

// RangeOptions select what ListRange lists.
type RangeOptions struct {
	// StartAfter lists only keys after this one ("" from the first key).
	StartAfter string
	// Versions lists every version and delete marker (ListObjectVersions); otherwise
	// the current objects (ListObjectsV2).
	Versions bool
	// MaxKeys is the page size asked for; 0 leaves it to the store (1000).
	MaxKeys int32
}

// EntryPage is one page of ListRange.
type EntryPage struct {
	// Entries are in key order; the versions of one key newest first, delete markers
	// among them where the store lists them.
	Entries []ObjectEntry
	// Next resumes the listing; nil on the last page.
	Next *PageToken
}

// ListRange lists one page of the bucket's objects (or versions) after
// opts.StartAfter, in key order, with their sizes and ETags: what a copy between two
// stores compares. page is nil for the first page. A key's versions may continue on
// the next page.
func (c *client) ListRange(ctx context.Context, bucket string, opts RangeOptions, page *PageToken) (EntryPage, error) {
	if !opts.Versions {
		return c.listCurrentRange(ctx, bucket, opts, page)
	}
	var res EntryPage
	err := c.call(ctx, "ListObjectVersions", bucket, "", func(ctx context.Context) error {
		in := &awss3.ListObjectVersionsInput{Bucket: aws.String(bucket), KeyMarker: nonEmpty(opts.StartAfter)}
		if opts.MaxKeys > 0 {
			in.MaxKeys = aws.Int32(opts.MaxKeys)
		}
		if page != nil {
			in.KeyMarker = nonEmpty(page.KeyMarker)
			in.VersionIdMarker = nonEmpty(page.VersionIDMarker)
		}
		var raw bytes.Buffer
		out, err := c.api.ListObjectVersions(ctx, in, func(o *awss3.Options) {
			o.APIOptions = append(o.APIOptions, keepBody(&raw))
		})
		if err != nil {
			return err
		}
		res = EntryPage{Entries: versionEntries(out, raw.Bytes())}
		if aws.ToBool(out.IsTruncated) && (aws.ToString(out.NextKeyMarker) != "" || aws.ToString(out.NextVersionIdMarker) != "") {
			res.Next = &PageToken{KeyMarker: aws.ToString(out.NextKeyMarker), VersionIDMarker: aws.ToString(out.NextVersionIdMarker)}
		}
		return nil
	})
	return res, err
}

func (c *client) listCurrentRange(ctx context.Context, bucket string, opts RangeOptions, page *PageToken) (EntryPage, error) {
	var res EntryPage
	err := c.call(ctx, "ListObjectsV2", bucket, "", func(ctx context.Context) error {
		in := &awss3.ListObjectsV2Input{Bucket: aws.String(bucket), StartAfter: nonEmpty(opts.StartAfter)}
		if opts.MaxKeys > 0 {
			in.MaxKeys = aws.Int32(opts.MaxKeys)
		}
		if page != nil {
			in.ContinuationToken = nonEmpty(page.ContinuationToken)
		}
		out, err := c.api.ListObjectsV2(ctx, in)
		if err != nil {
			return err
		}
		res = EntryPage{}
		for _, o := range out.Contents {
			res.Entries = append(res.Entries, ObjectEntry{
				Key: aws.ToString(o.Key), IsLatest: true, Size: aws.ToInt64(o.Size),
				ETag: unquote(aws.ToString(o.ETag)), LastModified: aws.ToTime(o.LastModified),
			})
		}
		if next := aws.ToString(out.NextContinuationToken); aws.ToBool(out.IsTruncated) && next != "" {
			res.Next = &PageToken{ContinuationToken: next, Unversioned: true}
		}
		return nil
	})
	return res, err
}

// versionEntries merges the SDK's two lists (versions, delete markers) back into the
// order the store sent them in, which the SDK loses: it is the order of a key's
// history, and a delete marker written in the same second as a version cannot be
// placed by its time. raw is the answer's XML; without it (or if it cannot be read)
// the entries are ordered by key and then newest first by time.
func versionEntries(out *awss3.ListObjectVersionsOutput, raw []byte) []ObjectEntry {
	entries := make([]ObjectEntry, 0, len(out.Versions)+len(out.DeleteMarkers))
	for _, v := range out.Versions {
		entries = append(entries, ObjectEntry{
			Key: aws.ToString(v.Key), VersionID: aws.ToString(v.VersionId), IsLatest: aws.ToBool(v.IsLatest),
			Size: aws.ToInt64(v.Size), ETag: unquote(aws.ToString(v.ETag)), LastModified: aws.ToTime(v.LastModified),
		})
	}
	for _, m := range out.DeleteMarkers {
		entries = append(entries, ObjectEntry{
			Key: aws.ToString(m.Key), VersionID: aws.ToString(m.VersionId), IsLatest: aws.ToBool(m.IsLatest),
			IsDeleteMarker: true, LastModified: aws.ToTime(m.LastModified),
		})
	}
	order := documentOrder(raw)
	type id struct {
		key, version string
		marker       bool
	}
	pos := make(map[id]int, len(order))
	for i, o := range order {
		pos[id{o.Key, o.VersionID, o.IsDeleteMarker}] = i
	}
	rank := func(e ObjectEntry) (int, bool) {
		p, ok := pos[id{e.Key, e.VersionID, e.IsDeleteMarker}]
		return p, ok
	}
	if !sortedByKey(order) {
		// Versity lists a page's delete markers apart from its versions: its order is
		// no history. Its version IDs are ULIDs, which sort as they were made, markers
		// and versions alike, and the current one leads.
		sort.SliceStable(entries, func(i, j int) bool {
			a, b := entries[i], entries[j]
			switch {
			case a.Key != b.Key:
				return a.Key < b.Key
			case a.IsLatest != b.IsLatest:
				return a.IsLatest
			}
			return a.VersionID > b.VersionID
		})
		return entries
	}
	sort.SliceStable(entries, func(i, j int) bool {
		pi, oki := rank(entries[i])
		pj, okj := rank(entries[j])
		if oki && okj {
			return pi < pj
		}
		if entries[i].Key != entries[j].Key {
			return entries[i].Key < entries[j].Key
		}
		return entries[i].LastModified.After(entries[j].LastModified)
	})
	return entries
}

// sortedByKey says whether a listing's document lists its entries in key order, a
// key's versions and delete markers together, as S3 does.
func sortedByKey(order []ObjectEntry) bool {
	for i := 1; i < len(order); i++ {
		if order[i].Key < order[i-1].Key {
			return false
		}
	}
	return true
}

// documentOrder reads the Version and DeleteMarker elements of a ListObjectVersions
// answer in document order (only their keys and version IDs); nil if raw is not such
// a document.
func documentOrder(raw []byte) []ObjectEntry {
	var doc struct {
		Entries []struct {
			XMLName   xml.Name
			Key       string `xml:"Key"`
			VersionID string `xml:"VersionId"`
		} `xml:",any"`
	}
	if len(raw) == 0 || xml.Unmarshal(raw, &doc) != nil {
		return nil
	}
	var order []ObjectEntry
	for _, e := range doc.Entries {
		switch e.XMLName.Local {
		case "Version":
			order = append(order, ObjectEntry{Key: e.Key, VersionID: e.VersionID})
		case "DeleteMarker":
			order = append(order, ObjectEntry{Key: e.Key, VersionID: e.VersionID, IsDeleteMarker: true})
		}
	}
	return order
}

// keepBody copies the raw answer body into buf as the SDK's deserializer reads it. It
// sits between the deserializer and the transport, so it sees the bytes the
// deserializer parses; a listing page is at most MaxKeys entries, so buf stays small.
func keepBody(buf *bytes.Buffer) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Deserialize.Insert(middleware.DeserializeMiddlewareFunc("bucketkeeperKeepBody",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
				middleware.DeserializeOutput, middleware.Metadata, error,
			) {
				out, md, err := next.HandleDeserialize(ctx, in)
				if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp != nil && resp.Body != nil {
					resp.Body = teeCloser{Reader: io.TeeReader(resp.Body, buf), Closer: resp.Body}
				}
				return out, md, err
			}), "OperationDeserializer", middleware.After)
	}
}

type teeCloser struct {
	io.Reader
	io.Closer
}
