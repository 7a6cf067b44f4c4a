package s3

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
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
