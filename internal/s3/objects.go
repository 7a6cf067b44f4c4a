package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func (c *client) ListObjectVersions(ctx context.Context, bucket string, page *PageToken) (ObjectVersionPage, error) {
	var res ObjectVersionPage
	if page != nil && page.Unversioned {
		err := c.call(ctx, "ListObjectsV2", bucket, "", func(ctx context.Context) error {
			var err error
			res, err = c.listCurrent(ctx, bucket, page.ContinuationToken)
			return err
		})
		return res, err
	}
	err := c.call(ctx, "ListObjectVersions", bucket, "", func(ctx context.Context) error {
		in := &awss3.ListObjectVersionsInput{Bucket: aws.String(bucket)}
		if page != nil {
			in.KeyMarker = nonEmpty(page.KeyMarker)
			in.VersionIdMarker = nonEmpty(page.VersionIDMarker)
		}
		out, err := c.api.ListObjectVersions(ctx, in)
		if err != nil {
			// A store without version listing still has objects that must
			// go before DeleteBucket; list the current ones instead.
			if page == nil && KindOf(err) == KindNotImplemented {
				res, err = c.listCurrent(ctx, bucket, "")
			}
			return err
		}
		res = versionsPage(out)
		return nil
	})
	return res, err
}

func versionsPage(out *awss3.ListObjectVersionsOutput) ObjectVersionPage {
	var res ObjectVersionPage
	for _, v := range out.Versions {
		res.Versions = append(res.Versions, ObjectVersion{
			Key: aws.ToString(v.Key), VersionID: aws.ToString(v.VersionId), IsLatest: aws.ToBool(v.IsLatest),
		})
	}
	for _, m := range out.DeleteMarkers {
		res.Versions = append(res.Versions, ObjectVersion{
			Key: aws.ToString(m.Key), VersionID: aws.ToString(m.VersionId),
			IsLatest: aws.ToBool(m.IsLatest), IsDeleteMarker: true,
		})
	}
	// The SDK splits versions and markers into two lists; restore key order.
	sort.SliceStable(res.Versions, func(i, j int) bool { return res.Versions[i].Key < res.Versions[j].Key })
	// A truncated page without a marker cannot be resumed; stopping is
	// safe because whoever empties a bucket lists again after DeleteBucket
	// says it is not empty.
	if aws.ToBool(out.IsTruncated) && (aws.ToString(out.NextKeyMarker) != "" || aws.ToString(out.NextVersionIdMarker) != "") {
		res.Next = &PageToken{
			KeyMarker:       aws.ToString(out.NextKeyMarker),
			VersionIDMarker: aws.ToString(out.NextVersionIdMarker),
		}
	}
	return res
}

// listCurrent is the fallback listing for stores without version listing.
func (c *client) listCurrent(ctx context.Context, bucket, token string) (ObjectVersionPage, error) {
	var res ObjectVersionPage
	out, err := c.api.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{
		Bucket: aws.String(bucket), ContinuationToken: nonEmpty(token),
	})
	if err != nil {
		return res, err
	}
	for _, o := range out.Contents {
		res.Versions = append(res.Versions, ObjectVersion{Key: aws.ToString(o.Key), IsLatest: true})
	}
	if next := aws.ToString(out.NextContinuationToken); aws.ToBool(out.IsTruncated) && next != "" {
		res.Next = &PageToken{ContinuationToken: next, Unversioned: true}
	}
	return res, nil
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}

// ObjectError is one key DeleteObjects could not delete.
type ObjectError struct {
	Key, VersionID, Code, Message string
}

// DeleteObjectsError aggregates the per-key failures of DeleteObjects. It
// unwraps to an *Error classified from the first failure, so KindOf works.
type DeleteObjectsError struct {
	Bucket string
	Total  int // objects requested
	Failed []ObjectError
	first  *Error
}

func (e *DeleteObjectsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "s3 DeleteObjects bucket %q: %d of %d objects not deleted", e.Bucket, len(e.Failed), e.Total)
	for i, f := range e.Failed {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(e.Failed)-i)
			break
		}
		fmt.Fprintf(&b, "; %q", f.Key)
		if f.VersionID != "" {
			fmt.Fprintf(&b, " version %q", f.VersionID)
		}
		fmt.Fprintf(&b, ": %s %s", f.Code, f.Message)
	}
	return b.String()
}

// Unwrap returns the first failure as an *Error (nil for an error built without one).
func (e *DeleteObjectsError) Unwrap() error {
	if e.first == nil {
		return nil
	}
	return e.first
}

func (c *client) DeleteObjects(ctx context.Context, bucket string, objects []ObjectID) error {
	return c.deleteObjects(ctx, bucket, objects, false)
}

// deleteObjects sends DeleteObjects in batches, asking to bypass Governance retention
// when bypassGovernance is set.
func (c *client) deleteObjects(ctx context.Context, bucket string, objects []ObjectID, bypassGovernance bool) error {
	if len(objects) == 0 {
		return nil
	}
	agg := &DeleteObjectsError{Bucket: bucket, Total: len(objects)}
	for start := 0; start < len(objects); start += MaxDeleteBatch {
		batch := objects[start:min(start+MaxDeleteBatch, len(objects))]
		ids := make([]types.ObjectIdentifier, 0, len(batch))
		for _, o := range batch {
			ids = append(ids, types.ObjectIdentifier{Key: aws.String(o.Key), VersionId: nonEmpty(o.VersionID)})
		}
		var out *awss3.DeleteObjectsOutput
		err := c.call(ctx, "DeleteObjects", bucket, "", func(ctx context.Context) error {
			var err error
			in := &awss3.DeleteObjectsInput{
				Bucket: aws.String(bucket),
				Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
			}
			if bypassGovernance {
				in.BypassGovernanceRetention = aws.Bool(true)
			}
			out, err = c.api.DeleteObjects(ctx, in)
			return err
		})
		if err != nil {
			return err
		}
		for _, e := range out.Errors {
			code := aws.ToString(e.Code)
			if code == "NoSuchKey" || code == "NoSuchVersion" {
				continue // already gone: that is what we wanted
			}
			agg.Failed = append(agg.Failed, ObjectError{
				Key: aws.ToString(e.Key), VersionID: aws.ToString(e.VersionId),
				Code: code, Message: c.redact.apply(aws.ToString(e.Message)),
			})
		}
	}
	if len(agg.Failed) == 0 {
		return nil
	}
	f := agg.Failed[0]
	k := codeKinds[f.Code]
	agg.first = &Error{Op: "DeleteObjects", Bucket: bucket, Key: f.Key, Kind: k, Code: f.Code, msg: f.Message}
	return agg
}

func (c *client) PutObject(ctx context.Context, bucket, key string, body []byte) error {
	return c.call(ctx, "PutObject", bucket, key, func(ctx context.Context) error {
		_, err := c.api.PutObject(ctx, &awss3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(key),
			Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
		})
		return err
	})
}

func (c *client) GetObject(ctx context.Context, bucket, key string, maxBytes int64) ([]byte, error) {
	var data []byte
	err := c.call(ctx, "GetObject", bucket, key, func(ctx context.Context) error {
		out, err := c.api.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		if n := aws.ToInt64(out.ContentLength); n > maxBytes {
			return tooLarge(bucket, key, maxBytes)
		}
		data, err = io.ReadAll(io.LimitReader(out.Body, maxBytes+1))
		if err != nil {
			return err
		}
		if int64(len(data)) > maxBytes {
			data = nil
			return tooLarge(bucket, key, maxBytes)
		}
		return nil
	})
	return data, err
}

func tooLarge(bucket, key string, limit int64) error {
	return &Error{Op: "GetObject", Bucket: bucket, Key: key, Kind: KindInvalid,
		msg: fmt.Sprintf("larger than %d bytes", limit), err: ErrObjectTooLarge}
}

func (c *client) DeleteObject(ctx context.Context, bucket, key string) error {
	return c.call(ctx, "DeleteObject", bucket, key, func(ctx context.Context) error {
		_, err := c.api.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		return err
	})
}

// PurgeObject deletes every version and delete marker of one key, so that an object
// written and removed again (the probe's canary) leaves nothing behind on a versioned
// bucket; on an unversioned one it is a plain delete.
func (c *client) PurgeObject(ctx context.Context, bucket, key string) error {
	var ids []ObjectID
	err := c.call(ctx, "ListObjectVersions", bucket, key, func(ctx context.Context) error {
		out, err := c.api.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(key)})
		if err != nil {
			return err
		}
		for _, v := range versionsPage(out).Versions {
			if v.Key == key {
				ids = append(ids, ObjectID{Key: v.Key, VersionID: v.VersionID})
			}
		}
		return nil
	})
	if err != nil && KindOf(err) != KindNotImplemented {
		return err
	}
	if len(ids) == 0 {
		return c.DeleteObject(ctx, bucket, key)
	}
	return c.DeleteObjects(ctx, bucket, ids)
}
