package iam

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// adminPrefix is the path of MinIO's admin API, version 3, on the S3 port.
const adminPrefix = "/minio/admin/v3/"

// Bounds on what the operator reads of an admin answer. The user list is the one
// answer that grows with the store: 16 MiB is some hundred thousand users.
const (
	maxAdminAnswer    = 1 << 20
	maxAdminUserList  = 16 << 20
	maxAdminErrorBody = 64 << 10
	maxAdminMessage   = 300
	adminAttempts     = 3
)

// adminCall is one request to MinIO's admin API.
type adminCall struct {
	op     string // the operation's name in errors, metrics and logs
	user   string // the user it concerns, for errors
	method string
	path   string // below adminPrefix
	query  url.Values
	// body is sent as is; sealed bodies are encrypted with the operator's secret key
	// first (once: a retry sends the same ciphertext).
	body   []byte
	sealed bool
	// opened answers are decrypted; limit bounds the answer (maxAdminAnswer if zero).
	opened bool
	limit  int64
	// once: a single attempt, for calls whose repetition after a lost answer makes
	// something twice (a service account).
	once bool
}

// adminClient signs and sends calls to MinIO's admin API: SigV4 for the service
// "s3", with the payload's hash in X-Amz-Content-Sha256 as MinIO requires.
type adminClient struct {
	endpoint *url.URL
	region   string
	creds    aws.Credentials
	http     aws.HTTPClient
	signer   *v4.Signer
	timeout  time.Duration
	observer func(operation string, httpStatus int, err error)
}

// do runs one call under the per-call deadline, retrying transient failures, and
// returns the answer's body (decrypted where the call says so).
func (c *adminClient) do(ctx context.Context, call adminCall) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	body := call.body
	if call.sealed {
		sealed, err := encryptAdminBody(ctx, c.creds.SecretAccessKey, body)
		if err != nil {
			if ctx.Err() != nil {
				return nil, c.fail(call, ctx.Err(), 0)
			}
			return nil, &Error{Op: call.op, User: call.user, Kind: KindUnknown, msg: "encrypting the request: " + err.Error()}
		}
		body = sealed
	}
	attempts := adminAttempts
	if call.once {
		attempts = 1
	}
	var err error
	for attempt := range attempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, c.fail(call, ctx.Err(), 0)
			case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
			}
		}
		var answer []byte
		var status int
		answer, status, err = c.attempt(ctx, call, body)
		if c.observer != nil {
			c.observer(call.path, status, err) // MinIO's name of the call, e.g. add-user
		}
		if err == nil {
			if call.opened {
				plain, derr := decryptAdminBody(ctx, c.creds.SecretAccessKey, answer)
				if derr != nil {
					if ctx.Err() != nil {
						return nil, c.fail(call, ctx.Err(), 0)
					}
					return nil, &Error{Op: call.op, User: call.user, Kind: KindUnknown, msg: "decrypting the answer: " + derr.Error()}
				}
				return plain, nil
			}
			return answer, nil
		}
		if !retryable(err) {
			break
		}
	}
	return nil, err
}

// retryable: a failure a moment may mend (no answer, slow down, a server error).
func retryable(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Kind {
	case KindUnreachable, KindThrottled:
		return true
	case KindUnknown:
		return e.status >= 500
	}
	return false
}

// attempt sends the call once. The error is an *Error naming no secret.
func (c *adminClient) attempt(ctx context.Context, call adminCall, body []byte) ([]byte, int, error) {
	u := *c.endpoint
	u.Path = strings.TrimSuffix(u.Path, "/") + adminPrefix + call.path
	u.RawQuery = call.query.Encode()
	req, err := http.NewRequestWithContext(ctx, call.method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, 0, &Error{Op: call.op, User: call.user, Kind: KindInvalid, msg: "building the request: " + err.Error()}
	}
	if len(body) == 0 {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	if err := c.signer.SignHTTP(ctx, c.creds, req, hash, "s3", c.region, time.Now().UTC()); err != nil {
		return nil, 0, &Error{Op: call.op, User: call.user, Kind: KindInvalid, msg: "signing the request: " + err.Error()}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, c.fail(call, err, 0)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAdminErrorBody))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode/100 != 2 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAdminErrorBody))
		return nil, resp.StatusCode, adminError(call, resp.StatusCode, raw)
	}
	limit := call.limit
	if limit <= 0 {
		limit = maxAdminAnswer
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, resp.StatusCode, c.fail(call, err, resp.StatusCode)
	}
	if int64(len(answer)) > limit {
		return nil, resp.StatusCode, &Error{Op: call.op, User: call.user, Kind: KindUnknown, status: resp.StatusCode,
			msg: fmt.Sprintf("the answer is larger than %d bytes", limit)}
	}
	return answer, resp.StatusCode, nil
}

// fail classifies a failure without an answer from the server.
func (c *adminClient) fail(call adminCall, err error, status int) error {
	e := &Error{Op: call.op, User: call.user, status: status, err: err}
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		e.Kind, e.msg = KindTimeout, "no answer before the deadline"
	case errors.Is(err, context.Canceled):
		e.Kind, e.msg = KindTimeout, "canceled"
	case errors.As(err, &netErr):
		e.Kind, e.msg = KindUnreachable, netErr.Error()
	default:
		e.Kind, e.msg = KindUnreachable, err.Error()
	}
	return e
}

// adminCodeKinds classifies MinIO's error codes; others go by HTTP status.
var adminCodeKinds = map[string]Kind{
	"AccessDenied":               KindAccessDenied,
	"InvalidAccessKeyId":         KindInvalidCredentials,
	"SignatureDoesNotMatch":      KindInvalidCredentials,
	"XMinioAdminNoSuchUser":      KindNoSuchEntity,
	"XMinioAdminNoSuchPolicy":    KindNoSuchEntity,
	"XMinioAdminNoSuchGroup":     KindNoSuchEntity,
	"XMinioMalformedIAMPolicy":   KindInvalid,
	"XMinioAdminInvalidArgument": KindInvalid,
	"XMinioInvalidResource":      KindInvalid,
	"XMinioAdminConfigBadJSON":   KindInvalid,
	"XMinioIAMActionNotAllowed":  KindInvalid,
	"PolicyInvalidName":          KindInvalid,
	"XMinioServerNotInitialized": KindThrottled,
	"SlowDown":                   KindThrottled,
	"SlowDownRead":               KindThrottled,
	"SlowDownWrite":              KindThrottled,
	"NotImplemented":             KindNotImplemented,
}

// adminError reads MinIO's JSON error ({"Code": ..., "Message": ...}). A 404 without
// a MinIO code is a server that serves no admin API there (another store, a proxy).
func adminError(call adminCall, status int, raw []byte) error {
	var body struct{ Code, Message string }
	_ = json.Unmarshal(raw, &body)
	e := &Error{Op: call.op, User: call.user, Code: body.Code, status: status, msg: shorten(body.Message)}
	kind, known := adminCodeKinds[body.Code]
	switch {
	case body.Code == "XMinioInvalidIAMCredentials" && status == http.StatusNotFound:
		// MinIO's code for "no such service account".
		e.Kind = KindNoSuchEntity
	case known:
		e.Kind = kind
	case body.Code == "" && (status == http.StatusNotFound || status == http.StatusMethodNotAllowed):
		e.Kind, e.msg = KindNotImplemented, "the endpoint serves no MinIO admin API"
	default:
		e.Kind = kindOfHTTPStatus(status)
	}
	if e.msg == "" {
		e.msg = http.StatusText(status)
	}
	return e
}

// shorten bounds a server's message in an error.
func shorten(s string) string {
	if len(s) > maxAdminMessage {
		return s[:maxAdminMessage] + "…"
	}
	return s
}
