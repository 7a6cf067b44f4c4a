package s3

import (
	"context"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// MultipartUpload is one incomplete multipart upload: parts a client sent without
// completing or aborting the upload. Stores keep (and bill) them, and some refuse to
// delete a bucket that still has any.
type MultipartUpload struct {
	Key      string
	UploadID string
}

// UploadPageToken resumes ListMultipartUploads after the page that returned it.
type UploadPageToken struct {
	KeyMarker      string
	UploadIDMarker string
}

// MultipartUploadPage is one page of ListMultipartUploads.
type MultipartUploadPage struct {
	Uploads []MultipartUpload
	Next    *UploadPageToken
}

func (c *client) ListMultipartUploads(ctx context.Context, bucket string, page *UploadPageToken) (MultipartUploadPage, error) {
	var res MultipartUploadPage
	err := c.call(ctx, "ListMultipartUploads", bucket, "", func(ctx context.Context) error {
		in := &awss3.ListMultipartUploadsInput{Bucket: aws.String(bucket)}
		if page != nil {
			in.KeyMarker = nonEmpty(page.KeyMarker)
			in.UploadIdMarker = nonEmpty(page.UploadIDMarker)
		}
		out, err := c.api.ListMultipartUploads(ctx, in)
		if err != nil {
			return err
		}
		res = MultipartUploadPage{}
		for _, u := range out.Uploads {
			res.Uploads = append(res.Uploads, MultipartUpload{Key: aws.ToString(u.Key), UploadID: aws.ToString(u.UploadId)})
		}
		// As with versions: a truncated page without markers cannot be resumed, and
		// whoever empties the bucket lists again anyway.
		if aws.ToBool(out.IsTruncated) && (aws.ToString(out.NextKeyMarker) != "" || aws.ToString(out.NextUploadIdMarker) != "") {
			res.Next = &UploadPageToken{KeyMarker: aws.ToString(out.NextKeyMarker), UploadIDMarker: aws.ToString(out.NextUploadIdMarker)}
		}
		return nil
	})
	return res, err
}

func (c *client) AbortMultipartUpload(ctx context.Context, bucket, key, uploadID string) error {
	err := c.call(ctx, "AbortMultipartUpload", bucket, key, func(ctx context.Context) error {
		_, err := c.api.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{
			Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(uploadID),
		})
		return err
	})
	if KindOf(err) == KindNotFound {
		return nil // already completed or aborted: the upload is gone either way
	}
	return err
}

// Part is one uploaded part of a multipart upload.
type Part struct {
	Number int32
	ETag   string // without quotes: the MD5 of the part's bytes on every store we test
	Size   int64
}

// CreateMultipartUpload starts an upload of key that will carry meta (tags included)
// and returns its ID.
func (c *client) CreateMultipartUpload(ctx context.Context, bucket, key string, meta ObjectMeta) (string, error) {
	var id string
	lockMode, until, hold := meta.Lock.headers()
	err := c.call(ctx, "CreateMultipartUpload", bucket, key, func(ctx context.Context) error {
		out, err := c.api.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{
			Bucket: aws.String(bucket), Key: aws.String(key), Metadata: meta.Metadata, Tagging: tagging(meta.Tags),
			ContentType: nonEmpty(meta.ContentType), ContentEncoding: nonEmpty(meta.ContentEncoding),
			ContentLanguage: nonEmpty(meta.ContentLanguage), ContentDisposition: nonEmpty(meta.ContentDisposition),
			CacheControl:   nonEmpty(meta.CacheControl),
			ObjectLockMode: lockMode, ObjectLockRetainUntilDate: until, ObjectLockLegalHoldStatus: hold,
		}, writeOptions(false, meta.Expires)...)
		if err != nil {
			return err
		}
		id = aws.ToString(out.UploadId)
		return nil
	})
	return id, err
}

// UploadPart uploads part number of an upload from body (size bytes, streamed unsigned
// unless body is an io.ReadSeeker, see WriteObject) and returns the part's ETag.
func (c *client) UploadPart(ctx context.Context, bucket, key, uploadID string, number int32, body io.Reader, size int64, contentMD5 string) (string, error) {
	var etag string
	err := c.callFor(ctx, c.streamTimeout(size), "UploadPart", bucket, key, func(ctx context.Context) error {
		out, err := c.api.UploadPart(ctx, &awss3.UploadPartInput{
			Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(uploadID),
			PartNumber: aws.Int32(number), Body: body, ContentLength: aws.Int64(size), ContentMD5: nonEmpty(contentMD5),
		}, writeOptions(streamed(body), "")...)
		if err != nil {
			return err
		}
		etag = unquote(aws.ToString(out.ETag))
		return nil
	})
	return etag, err
}

// ListParts returns every part of an upload uploaded so far, in part order.
func (c *client) ListParts(ctx context.Context, bucket, key, uploadID string) ([]Part, error) {
	var parts []Part
	var marker *string
	for {
		var out *awss3.ListPartsOutput
		err := c.call(ctx, "ListParts", bucket, key, func(ctx context.Context) error {
			var err error
			out, err = c.api.ListParts(ctx, &awss3.ListPartsInput{
				Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(uploadID), PartNumberMarker: marker,
			})
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, p := range out.Parts {
			parts = append(parts, Part{Number: aws.ToInt32(p.PartNumber), ETag: unquote(aws.ToString(p.ETag)), Size: aws.ToInt64(p.Size)})
		}
		next := aws.ToString(out.NextPartNumberMarker)
		if !aws.ToBool(out.IsTruncated) || next == "" || (marker != nil && *marker == next) {
			return parts, nil
		}
		marker = aws.String(next)
	}
}

// CompleteMultipartUpload assembles the upload from parts (in part order).
func (c *client) CompleteMultipartUpload(ctx context.Context, bucket, key, uploadID string, parts []Part) (WriteResult, error) {
	var res WriteResult
	completed := make([]types.CompletedPart, 0, len(parts))
	for _, p := range parts {
		completed = append(completed, types.CompletedPart{PartNumber: aws.Int32(p.Number), ETag: quoted(p.ETag)})
	}
	// Assembling a large object takes some stores a while: as long as writing it again.
	var total int64
	for _, p := range parts {
		total += p.Size
	}
	err := c.callFor(ctx, c.streamTimeout(total), "CompleteMultipartUpload", bucket, key, func(ctx context.Context) error {
		out, err := c.api.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{
			Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(uploadID),
			MultipartUpload: &types.CompletedMultipartUpload{Parts: completed},
		})
		if err != nil {
			return err
		}
		res = WriteResult{ETag: unquote(aws.ToString(out.ETag)), VersionID: aws.ToString(out.VersionId)}
		return nil
	})
	return res, err
}
