package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// This file is the data plane of objects: what moving a bucket between stores reads
// and writes. Every call has a deadline: the client's RequestTimeout for a call whose
// body is in memory, and RequestTimeout plus the time the bytes take at
// MinTransferRate for a streamed one, so a stalled transfer fails instead of holding
// its worker.

// ObjectMeta is what S3 keeps with an object besides its bytes and that a copy must
// carry: the representation headers, user metadata and tags.
type ObjectMeta struct {
	ContentType        string
	ContentEncoding    string
	ContentLanguage    string
	ContentDisposition string
	CacheControl       string
	// Expires is the header as the store sent it: an HTTP date, or anything else a
	// client wrote (HTTP says an invalid date means "already expired"), copied verbatim.
	Expires string
	// Metadata is the user metadata (x-amz-meta-*), keys in lower case.
	Metadata map[string]string
	// Tags are the object's tags. ReadObject and OpenObject do not fill them: read
	// them with GetObjectTagging when TagCount says there are any.
	Tags map[string]string
	// Lock is what locks the version (object lock): a read fills it from the
	// x-amz-object-lock-* headers the store answers, a write sends it as those
	// headers, so a version is never written without it.
	Lock ObjectLock
}

// ObjectInfo is what a GET or HEAD of one object version answered.
type ObjectInfo struct {
	ObjectMeta
	// Size is the whole object's size, also for a ranged or part read.
	Size      int64
	ETag      string // without quotes
	VersionID string
	// TagCount is x-amz-tagging-count: -1 when the store did not send it (it sends
	// none for an object without tags too, so -1 means "ask").
	TagCount int32
	// PartsCount is x-amz-mp-parts-count of a read or HEAD by part number: how many
	// parts the object was uploaded in; 0 when the store did not say.
	PartsCount int32
	// ContentLength is the length of the body answered (a range's or a part's).
	ContentLength int64
	LastModified  time.Time
}

// ReadRequest selects what ReadObject, OpenObject and HeadObject read.
type ReadRequest struct {
	// VersionID reads that version; "" the current one.
	VersionID string
	// IfMatch, when set, makes the store refuse (412, see ChangedSince) an object
	// whose ETag is no longer this one.
	IfMatch string
	// Offset and Length select a byte range; Length 0 means to the end.
	Offset, Length int64
	// PartNumber reads one part of a multipart object (1-based); the answer tells
	// the part's length and the object's PartsCount. Excludes Offset and Length.
	PartNumber int32
}

// ChangedSince reports whether err is a store's 412 answer to IfMatch: the object was
// replaced since it was listed.
func ChangedSince(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.StatusCode == http.StatusPreconditionFailed || e.Code == "PreconditionFailed")
}

// ErrShortBody is wrapped when an object's body ends before the length the store
// announced, or when ReadObject's buffer cannot hold it.
var ErrShortBody = errors.New("object body shorter than announced")

func (r ReadRequest) rangeHeader() *string {
	switch {
	case r.PartNumber > 0 || (r.Offset == 0 && r.Length == 0):
		return nil
	case r.Length == 0:
		return aws.String(fmt.Sprintf("bytes=%d-", r.Offset))
	default:
		return aws.String(fmt.Sprintf("bytes=%d-%d", r.Offset, r.Offset+r.Length-1))
	}
}

func (r ReadRequest) partNumber() *int32 {
	if r.PartNumber > 0 {
		return aws.Int32(r.PartNumber)
	}
	return nil
}

// streamTimeout is the deadline of a call that moves size bytes in a stream.
func (c *client) streamTimeout(size int64) time.Duration {
	if c.timeout <= 0 {
		return 0
	}
	return c.timeout + time.Duration(float64(size)/float64(c.minRate)*float64(time.Second))
}

// ReadObject reads the object version's selected bytes into buf within one call's
// deadline and returns how many it read. A body longer than buf fails with
// ErrShortBody (nothing is read past buf): the caller sizes buf from the listing.
func (c *client) ReadObject(ctx context.Context, bucket, key string, req ReadRequest, buf []byte) (ObjectInfo, int, error) {
	var info ObjectInfo
	var n int
	err := c.callFor(ctx, c.streamTimeout(int64(len(buf))), "GetObject", bucket, key, func(ctx context.Context) error {
		out, err := c.api.GetObject(ctx, getInput(bucket, key, req))
		if err != nil {
			return err
		}
		defer out.Body.Close()
		info = getInfo(out)
		if info.ContentLength > int64(len(buf)) {
			return fmt.Errorf("%w: %d bytes announced, room for %d", ErrShortBody, info.ContentLength, len(buf))
		}
		n, err = io.ReadFull(out.Body, buf[:info.ContentLength])
		if err != nil {
			return fmt.Errorf("%w: %w", ErrShortBody, err)
		}
		return nil
	})
	return info, n, err
}

// OpenObject starts reading the object version's selected bytes and returns the body
// for the caller to stream. The body must be closed; it is read under a deadline of
// its own (RequestTimeout plus its length at MinTransferRate), which closing ends.
func (c *client) OpenObject(ctx context.Context, bucket, key string, req ReadRequest, length int64) (ObjectInfo, io.ReadCloser, error) {
	ctx, cancel := withTimeout(ctx, c.streamTimeout(length))
	var info ObjectInfo
	var body io.ReadCloser
	err := c.redact.wrap("GetObject", bucket, key, func() error {
		out, err := c.api.GetObject(ctx, getInput(bucket, key, req))
		if err != nil {
			return err
		}
		info, body = getInfo(out), out.Body
		return nil
	}())
	if err != nil {
		cancel()
		return info, nil, err
	}
	return info, &cancelOnClose{ReadCloser: body, cancel: cancel, op: "GetObject", bucket: bucket, key: key, redact: c.redact}, nil
}

// cancelOnClose ends a streamed body's deadline when the body is closed, and turns
// read errors into *Error like every other failure of this package.
type cancelOnClose struct {
	io.ReadCloser
	cancel          context.CancelFunc
	op, bucket, key string
	redact          redactor
}

func (b *cancelOnClose) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = b.redact.wrap(b.op, b.bucket, b.key, err)
	}
	return n, err
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// HeadObject reads the object version's metadata; with PartNumber, the part's length
// (ContentLength) and the object's PartsCount.
func (c *client) HeadObject(ctx context.Context, bucket, key string, req ReadRequest) (ObjectInfo, error) {
	var info ObjectInfo
	err := c.call(ctx, "HeadObject", bucket, key, func(ctx context.Context) error {
		out, err := c.api.HeadObject(ctx, &awss3.HeadObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(key), VersionId: nonEmpty(req.VersionID),
			IfMatch: quoted(req.IfMatch), PartNumber: req.partNumber(), Range: req.rangeHeader(),
		})
		if err != nil {
			return err
		}
		info = objectHeaders{out.ContentType, out.ContentEncoding, out.ContentLanguage, out.ContentDisposition, out.CacheControl,
			out.ExpiresString, out.ETag, out.VersionId, out.ContentRange, out.Metadata, out.PartsCount, nil, out.ContentLength, out.LastModified,
			lockOfHeaders(string(out.ObjectLockMode), out.ObjectLockRetainUntilDate, out.ObjectLockLegalHoldStatus)}.info()
		return nil
	})
	return info, err
}

// GetObjectTagging returns the object version's tags; none is an empty, non-nil map.
func (c *client) GetObjectTagging(ctx context.Context, bucket, key, versionID string) (map[string]string, error) {
	tags := map[string]string{}
	err := c.call(ctx, "GetObjectTagging", bucket, key, func(ctx context.Context) error {
		out, err := c.api.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: nonEmpty(versionID)})
		if err != nil {
			return err
		}
		for _, t := range out.TagSet {
			tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		return nil
	})
	return tags, err
}

// WriteResult is what a store answered to a completed write.
type WriteResult struct {
	ETag      string // without quotes
	VersionID string // "" on an unversioned bucket
}

// WriteObject writes one object of size bytes with meta (tags included). A body in
// memory (an io.ReadSeeker) is signed and retried like any request; any other body is
// streamed once with an unsigned payload, so a failed attempt is the caller's to
// repeat. contentMD5 (base64), when set, makes the store refuse a body whose MD5
// differs (BadDigest).
func (c *client) WriteObject(ctx context.Context, bucket, key string, meta ObjectMeta, body io.Reader, size int64, contentMD5 string) (WriteResult, error) {
	var res WriteResult
	err := c.callFor(ctx, c.streamTimeout(size), "PutObject", bucket, key, func(ctx context.Context) error {
		in := &awss3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(key), Body: body, ContentLength: aws.Int64(size),
			ContentMD5: nonEmpty(contentMD5), Metadata: meta.Metadata, Tagging: tagging(meta.Tags),
			ContentType: nonEmpty(meta.ContentType), ContentEncoding: nonEmpty(meta.ContentEncoding),
			ContentLanguage: nonEmpty(meta.ContentLanguage), ContentDisposition: nonEmpty(meta.ContentDisposition),
			CacheControl: nonEmpty(meta.CacheControl),
		}
		in.ObjectLockMode, in.ObjectLockRetainUntilDate, in.ObjectLockLegalHoldStatus = meta.Lock.headers()
		if size == 0 {
			in.Body = bytes.NewReader(nil)
		}
		out, err := c.api.PutObject(ctx, in, writeOptions(streamed(in.Body), meta.Expires)...)
		if err != nil {
			return err
		}
		res = WriteResult{ETag: unquote(aws.ToString(out.ETag)), VersionID: aws.ToString(out.VersionId)}
		return nil
	})
	return res, err
}

// writeOptions are a write's per-call options: a streamed body is sent unsigned and
// not retried (it cannot be rewound), and Expires goes out verbatim.
func writeOptions(streamed bool, expires string) []func(*awss3.Options) {
	var opts []func(*awss3.Options)
	if streamed {
		opts = append(opts, func(o *awss3.Options) {
			o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
			o.Retryer = retry.AddWithMaxAttempts(o.Retryer, 1)
		})
	}
	if expires != "" {
		opts = append(opts, func(o *awss3.Options) {
			o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
				return stack.Build.Add(middleware.BuildMiddlewareFunc("bucketkeeperExpires",
					func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
						if req, ok := in.Request.(*smithyhttp.Request); ok {
							req.Header.Set("Expires", expires)
						}
						return next.HandleBuild(ctx, in)
					}), middleware.After)
			})
		})
	}
	return opts
}

// streamed says whether body is sent as a stream: it is not in memory (an
// io.ReadSeeker), so it can be neither hashed for the signature nor rewound.
func streamed(body io.Reader) bool {
	_, seekable := body.(io.ReadSeeker)
	return !seekable
}

// tagging is tags as the x-amz-tagging header's query string, nil for none.
func tagging(tags map[string]string) *string {
	if len(tags) == 0 {
		return nil
	}
	v := url.Values{}
	for k, val := range tags {
		v.Set(k, val)
	}
	return aws.String(v.Encode())
}

func getInput(bucket, key string, req ReadRequest) *awss3.GetObjectInput {
	return &awss3.GetObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), VersionId: nonEmpty(req.VersionID),
		IfMatch: quoted(req.IfMatch), Range: req.rangeHeader(), PartNumber: req.partNumber(),
	}
}

func getInfo(out *awss3.GetObjectOutput) ObjectInfo {
	return objectHeaders{out.ContentType, out.ContentEncoding, out.ContentLanguage, out.ContentDisposition, out.CacheControl,
		out.ExpiresString, out.ETag, out.VersionId, out.ContentRange, out.Metadata, out.PartsCount, out.TagCount, out.ContentLength, out.LastModified,
		lockOfHeaders(string(out.ObjectLockMode), out.ObjectLockRetainUntilDate, out.ObjectLockLegalHoldStatus)}.info()
}

// objectHeaders are the headers of an object a GET and a HEAD both answer (a HEAD
// no tag count), in the SDK's pointers.
type objectHeaders struct {
	contentType, contentEncoding, contentLanguage, contentDisposition, cacheControl, expires *string
	etag, versionID, contentRange                                                            *string
	metadata                                                                                 map[string]string
	partsCount, tagCount                                                                     *int32
	contentLength                                                                            *int64
	lastModified                                                                             *time.Time
	lock                                                                                     ObjectLock
}

func (h objectHeaders) info() ObjectInfo {
	info := ObjectInfo{
		ObjectMeta: ObjectMeta{
			ContentType: aws.ToString(h.contentType), ContentEncoding: aws.ToString(h.contentEncoding),
			ContentLanguage: aws.ToString(h.contentLanguage), ContentDisposition: aws.ToString(h.contentDisposition),
			CacheControl: aws.ToString(h.cacheControl), Expires: aws.ToString(h.expires), Metadata: h.metadata,
			Lock: h.lock,
		},
		ETag: unquote(aws.ToString(h.etag)), VersionID: aws.ToString(h.versionID), TagCount: -1,
		PartsCount: aws.ToInt32(h.partsCount), ContentLength: aws.ToInt64(h.contentLength),
		LastModified: aws.ToTime(h.lastModified),
	}
	if h.tagCount != nil {
		info.TagCount = *h.tagCount
	}
	info.Size = sizeOf(aws.ToString(h.contentRange), info.ContentLength)
	return info
}

// sizeOf is the whole object's size: the total of Content-Range ("bytes 0-9/42") when
// the answer was partial, else the body's length.
func sizeOf(contentRange string, length int64) int64 {
	if i := strings.LastIndexByte(contentRange, '/'); i >= 0 {
		var total int64
		if _, err := fmt.Sscan(contentRange[i+1:], &total); err == nil {
			return total
		}
	}
	return length
}

func quoted(etag string) *string {
	if etag == "" {
		return nil
	}
	return aws.String(`"` + etag + `"`)
}

func unquote(etag string) string { return strings.Trim(etag, `"`) }

// callFor is call with a deadline of d instead of the client's RequestTimeout.
func (c *client) callFor(ctx context.Context, d time.Duration, op, bucket, key string, fn func(context.Context) error) error {
	ctx, cancel := withTimeout(ctx, d)
	defer cancel()
	return c.redact.wrap(op, bucket, key, fn(ctx))
}
