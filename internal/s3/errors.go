package s3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Kind is the operator-relevant class of a failed S3 call. Controllers switch
// on it instead of on server-specific codes, which differ between stores.
type Kind int

// The kinds. KindUnknown is the zero value so an unclassified error is never
// mistaken for a meaningful one.
const (
	KindUnknown Kind = iota
	// KindAlreadyOwnedByYou: CreateBucket on a bucket this identity owns.
	KindAlreadyOwnedByYou
	// KindBucketNameTaken: CreateBucket on a name owned by someone else
	// (BucketAlreadyExists). Some stores also answer this for our own bucket;
	// the operator double-checks ownership with tags.
	KindBucketNameTaken
	// KindNotFound: the bucket (or object) does not exist.
	KindNotFound
	// KindNotEmpty: DeleteBucket on a bucket that still holds objects.
	KindNotEmpty
	// KindAccessDenied: the identity is known but not allowed.
	KindAccessDenied
	// KindInvalidCredentials: the store does not accept the key pair at all.
	KindInvalidCredentials
	// KindNotImplemented: the store does not support the operation.
	KindNotImplemented
	// KindThrottled: the store asked us to slow down.
	KindThrottled
	// KindUnreachable: no HTTP response (connection refused, DNS, reset).
	KindUnreachable
	// KindTLS: the TLS handshake failed (unknown CA, bad hostname, plain
	// HTTP on an https endpoint). Not transient: it needs a config change.
	KindTLS
	// KindTimeout: a deadline expired before an answer arrived.
	KindTimeout
	// KindCanceled: the caller canceled the context.
	KindCanceled
	// KindInvalid: the request was malformed or refused as invalid
	// (bad name, bad policy, bad XML, wrong region).
	KindInvalid
	// KindServerError: any other 5xx answer.
	KindServerError
)

var kindNames = [...]string{
	KindUnknown:            "Unknown",
	KindAlreadyOwnedByYou:  "AlreadyOwnedByYou",
	KindBucketNameTaken:    "BucketNameTaken",
	KindNotFound:           "NotFound",
	KindNotEmpty:           "NotEmpty",
	KindAccessDenied:       "AccessDenied",
	KindInvalidCredentials: "InvalidCredentials",
	KindNotImplemented:     "NotImplemented",
	KindThrottled:          "Throttled",
	KindUnreachable:        "Unreachable",
	KindTLS:                "TLS",
	KindTimeout:            "Timeout",
	KindCanceled:           "Canceled",
	KindInvalid:            "Invalid",
	KindServerError:        "ServerError",
}

// String returns a stable CamelCase name, suitable for metric labels and
// condition reasons.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// codeKinds maps S3 error codes (as sent by AWS and the compatible stores we
// test against) to kinds. The code wins over the HTTP status because stores
// reuse statuses: Versity answers an unknown access key with 404
// XAdminUserNotFound, which must not read as "bucket missing".
var codeKinds = map[string]Kind{
	"BucketAlreadyOwnedByYou": KindAlreadyOwnedByYou,
	"BucketAlreadyExists":     KindBucketNameTaken,

	"NoSuchBucket":  KindNotFound,
	"NotFound":      KindNotFound, // HeadBucket/HeadObject 404 without a body
	"NoSuchKey":     KindNotFound,
	"NoSuchVersion": KindNotFound,
	"NoSuchUpload":  KindNotFound,
	// "No such configuration" answers; the Get* methods turn these into
	// empty results, but if one escapes it is still a not-found.
	"NoSuchTagSet":                          KindNotFound,
	"NoSuchTagSetError":                     KindNotFound,
	"NoSuchBucketPolicy":                    KindNotFound,
	"NoSuchLifecycleConfiguration":          KindNotFound,
	"NoSuchCORSConfiguration":               KindNotFound,
	"NoSuchPublicAccessBlockConfiguration":  KindNotFound,
	"NoSuchPublicAccessBlockConfigurations": KindNotFound,
	"ObjectLockConfigurationNotFoundError":  KindNotFound,
	"NoSuchObjectLockConfiguration":         KindNotFound, // Versity: with status 400
	"NoSuchObjectLegalHold":                 KindNotFound, // SeaweedFS

	"BucketNotEmpty": KindNotEmpty,

	"AccessDenied":       KindAccessDenied,
	"Forbidden":          KindAccessDenied, // HeadBucket 403 without a body
	"AllAccessDisabled":  KindAccessDenied,
	"AccountProblem":     KindAccessDenied,
	"XAdminAccessDenied": KindAccessDenied,

	"InvalidAccessKeyId":    KindInvalidCredentials,
	"SignatureDoesNotMatch": KindInvalidCredentials,
	"XAdminUserNotFound":    KindInvalidCredentials,
	"InvalidToken":          KindInvalidCredentials,
	"ExpiredToken":          KindInvalidCredentials,
	"TokenRefreshRequired":  KindInvalidCredentials,
	"InvalidSecurity":       KindInvalidCredentials,
	"InvalidClientTokenId":  KindInvalidCredentials,
	"Unauthorized":          KindInvalidCredentials,

	"NotImplemented":          KindNotImplemented,
	"XNotImplemented":         KindNotImplemented,
	"VersioningNotConfigured": KindNotImplemented, // Versity without a versioning dir

	"SlowDown":                   KindThrottled,
	"Throttling":                 KindThrottled,
	"ThrottlingException":        KindThrottled,
	"RequestLimitExceeded":       KindThrottled,
	"TooManyRequests":            KindThrottled,
	"TooManyRequestsException":   KindThrottled,
	"RequestThrottled":           KindThrottled,
	"BandwidthLimitExceeded":     KindThrottled,
	"XMinioServerNotInitialized": KindThrottled,
	// AWS: "a conflicting conditional operation is currently in progress against this
	// resource", e.g. a create right after the name's deletion. It passes: back off.
	"OperationAborted": KindThrottled,

	"RequestTimeout": KindTimeout,

	"InvalidBucketName":                       KindInvalid,
	"InvalidArgument":                         KindInvalid,
	"InvalidRequest":                          KindInvalid,
	"MalformedXML":                            KindInvalid,
	"MalformedPolicy":                         KindInvalid,
	"InvalidPolicyDocument":                   KindInvalid,
	"InvalidTag":                              KindInvalid,
	"InvalidLocationConstraint":               KindInvalid,
	"IllegalLocationConstraintException":      KindInvalid,
	"AuthorizationHeaderMalformed":            KindInvalid, // usually a wrong region
	"PermanentRedirect":                       KindInvalid, // wrong region/endpoint
	"MovedPermanently":                        KindInvalid,
	"IllegalVersioningConfigurationException": KindInvalid,
	"InvalidBucketState":                      KindInvalid,
	"InvalidRetentionPeriod":                  KindInvalid,
	"BadRequest":                              KindInvalid,
	"TooManyBuckets":                          KindInvalid, // AWS's per-account limit: a human raises it
}

// KindOf classifies any error returned by this package (or by the SDK
// directly). It never returns KindUnknown for a nil error's sake: nil is
// KindUnknown too, so check err != nil first.
func KindOf(err error) Kind {
	if err == nil {
		return KindUnknown
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	k, _, _ := classify(err)
	return k
}

// Unanswered reports whether a failed request may have been carried out all the same,
// and may even be carried out later: no answer came (a timeout, a dropped connection, a
// canceled call) or the store answered with a server error, which can come after the
// work was done. An answer that refuses the request (4xx), or a failure before anything
// was sent (a TLS handshake, arguments refused here), says it was not.
func Unanswered(err error) bool {
	if err == nil {
		return false
	}
	kind, status := KindUnknown, 0
	var e *Error
	if errors.As(err, &e) {
		kind, status = e.Kind, e.StatusCode
	} else {
		kind, _, status = classify(err)
	}
	if status == 0 {
		return kind != KindTLS && kind != KindInvalid
	}
	return status >= 500
}

// classify extracts the kind, the S3 error code and the HTTP status from a
// raw SDK error.
func classify(err error) (Kind, string, int) {
	status := statusOf(err)
	code := ""
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
		if code == "UnknownError" { // the SDK's placeholder for "no body"
			code = ""
		}
	}

	// A context error may be wrapped in an SDK error that also carries a
	// code; what the caller sees is the expired context, so it goes first.
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return KindTimeout, code, status
	case errors.Is(err, context.Canceled):
		return KindCanceled, code, status
	}

	if k, ok := codeKinds[code]; ok {
		return k, code, status
	}
	if status != 0 {
		k, _ := statusKind(status)
		return k, code, status
	}
	k, _ := transportKind(err)
	return k, code, status
}

// statusKind is the fallback for answers whose code we do not know (or
// that had no body, like every HEAD response).
func statusKind(status int) (Kind, bool) {
	switch {
	case status == 404:
		return KindNotFound, true
	case status == 403:
		return KindAccessDenied, true
	case status == 401:
		return KindInvalidCredentials, true
	case status == 400:
		return KindInvalid, true
	case status == 429:
		return KindThrottled, true
	case status == 501:
		return KindNotImplemented, true
	case status == 503:
		// 503 is S3's "slow down" status even when the body is not.
		return KindThrottled, true
	case status >= 500:
		return KindServerError, true
	}
	return KindUnknown, false
}

// transportKind classifies errors that happened before any HTTP answer.
func transportKind(err error) (Kind, bool) {
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return KindTimeout, true
	}
	if isTLSError(err) {
		return KindTLS, true
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var sendErr *smithyhttp.RequestSendError
	switch {
	case errors.As(err, &dnsErr), errors.As(err, &opErr),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.As(err, &sendErr):
		return KindUnreachable, true
	}
	return KindUnknown, false
}

func isTLSError(err error) bool {
	var (
		unknownAuth x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		certInvalid x509.CertificateInvalidError
		verifyErr   *tls.CertificateVerificationError
		recordErr   tls.RecordHeaderError
		alertErr    tls.AlertError
	)
	if errors.As(err, &unknownAuth) || errors.As(err, &hostErr) ||
		errors.As(err, &certInvalid) || errors.As(err, &verifyErr) ||
		errors.As(err, &recordErr) || errors.As(err, &alertErr) {
		return true
	}
	// Some handshake failures are plain errors from crypto/tls, and
	// net/http reports plain HTTP on an https URL as text only.
	msg := err.Error()
	return strings.Contains(msg, "tls: ") || strings.Contains(msg, "HTTP response to HTTPS client")
}

// statusOf returns the HTTP status of the answer behind err, or 0 when no
// answer arrived.
func statusOf(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// Error is what every Client method returns on failure. It keeps the
// operation and bucket so a condition message is useful on its own, and the
// server's code and HTTP status so the contract tests can pin them.
type Error struct {
	Op         string // SDK operation name, e.g. "CreateBucket"
	Bucket     string
	Key        string // object key, for object operations
	Kind       Kind
	Code       string // S3 error code, "" when no answer or no body
	StatusCode int    // HTTP status, 0 when no answer
	msg        string // redacted cause text
	err        error
}

func (e *Error) Error() string {
	b := e.summary()
	if e.msg != "" {
		b.WriteString(": ")
		b.WriteString(e.msg)
	}
	return b.String()
}

// Summary is the error without its cause text: operation, bucket, kind and status.
// The cause of a network or TLS failure names the store's addresses and certificate
// chain, which belong to the store's admin; a tenant's condition shows the summary.
func (e *Error) Summary() string {
	b := e.summary()
	return b.String()
}

func (e *Error) summary() *strings.Builder {
	b := &strings.Builder{}
	b.WriteString("s3 ")
	b.WriteString(e.Op)
	if e.Bucket != "" {
		fmt.Fprintf(b, " bucket %q", e.Bucket)
	}
	if e.Key != "" {
		fmt.Fprintf(b, " key %q", e.Key)
	}
	fmt.Fprintf(b, ": %s", e.Kind)
	if e.Code != "" || e.StatusCode != 0 {
		b.WriteString(" (")
		if e.Code != "" {
			b.WriteString(e.Code)
			if e.StatusCode != 0 {
				b.WriteString(", ")
			}
		}
		if e.StatusCode != 0 {
			fmt.Fprintf(b, "HTTP %d", e.StatusCode)
		}
		b.WriteString(")")
	}
	return b
}

// Unwrap exposes the SDK error for errors.Is/As (context errors, smithy
// types). Its text is not redacted; print the *Error instead.
func (e *Error) Unwrap() error { return e.err }

// ErrObjectTooLarge is wrapped by GetObject when the object exceeds the
// caller's size limit.
var ErrObjectTooLarge = errors.New("object exceeds the size limit")

// redactor removes secrets from text before it is put into an error. A
// store has no business echoing a secret, but a misconfigured proxy or a
// debug-mode server might, and error strings end up in Kubernetes events.
type redactor []string

func (r redactor) apply(s string) string {
	for _, secret := range r {
		if len(secret) >= 4 {
			s = strings.ReplaceAll(s, secret, "[REDACTED]")
		}
	}
	return s
}

// wrap turns an SDK error into an *Error for op on bucket/key.
func (r redactor) wrap(op, bucket, key string, err error) error {
	if err == nil {
		return nil
	}
	var already *Error
	if errors.As(err, &already) {
		return err
	}
	k, code, status := classify(err)
	return &Error{
		Op: op, Bucket: bucket, Key: key,
		Kind: k, Code: code, StatusCode: status,
		msg: r.apply(causeText(err)),
		err: err,
	}
}

// causeText is the most specific human text available: the server's
// message for API errors, else the innermost transport error.
func causeText(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorMessage()
	}
	return err.Error()
}

// APIError classifies an answer of a store's API outside S3 proper (an admin API) the
// way this package classifies S3's: by its error code, else its HTTP status, else, when
// no answer came (status 0), by cause. Admin clients return it, so one verdict table
// serves every API of a store. msg is the store's text, redacted of secrets.
func APIError(op, bucket string, status int, code, msg string, cause error, secrets ...string) *Error {
	k, ok := codeKinds[code]
	switch {
	case ok:
	case cause != nil && errors.Is(cause, context.DeadlineExceeded):
		k = KindTimeout
	case cause != nil && errors.Is(cause, context.Canceled):
		k = KindCanceled
	case status != 0:
		k, _ = statusKind(status)
	case cause != nil:
		k, _ = transportKind(cause)
	}
	if msg == "" && cause != nil {
		msg = cause.Error()
	}
	return &Error{Op: op, Bucket: bucket, Kind: k, Code: code, StatusCode: status, msg: redactor(secrets).apply(msg), err: cause}
}
