package iam

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// Kind is the operator-relevant class of a failed IAM call.
type Kind int

// The kinds; KindUnknown is the zero value.
const (
	KindUnknown Kind = iota
	// KindAccessDenied: the operator's identity may not manage users.
	KindAccessDenied
	// KindInvalidCredentials: the endpoint does not accept the operator's key.
	KindInvalidCredentials
	// KindNoSuchEntity: the user, key or policy does not exist.
	KindNoSuchEntity
	// KindEntityAlreadyExists: the user already exists.
	KindEntityAlreadyExists
	// KindLimitExceeded: e.g. a third access key.
	KindLimitExceeded
	// KindUnreachable: no answer (connection refused, DNS, TLS, reset).
	KindUnreachable
	// KindTimeout: the call's deadline passed.
	KindTimeout
	// KindInvalid: the request was refused as malformed (bad name, bad policy).
	KindInvalid
	// KindThrottled: the endpoint asked us to slow down.
	KindThrottled
	// KindNotImplemented: the endpoint does not serve this IAM call.
	KindNotImplemented
)

var kindNames = map[Kind]string{
	KindUnknown: "Unknown", KindAccessDenied: "AccessDenied", KindInvalidCredentials: "InvalidCredentials",
	KindNoSuchEntity: "NoSuchEntity", KindEntityAlreadyExists: "EntityAlreadyExists", KindLimitExceeded: "LimitExceeded",
	KindUnreachable: "Unreachable", KindTimeout: "Timeout", KindInvalid: "Invalid", KindThrottled: "Throttled",
	KindNotImplemented: "NotImplemented",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

var codeKinds = map[string]Kind{
	"AccessDenied":            KindAccessDenied,
	"AccessDeniedException":   KindAccessDenied,
	"Forbidden":               KindAccessDenied,
	"InvalidClientTokenId":    KindInvalidCredentials,
	"InvalidAccessKeyId":      KindInvalidCredentials,
	"SignatureDoesNotMatch":   KindInvalidCredentials,
	"NoSuchEntity":            KindNoSuchEntity,
	"NoSuchEntityException":   KindNoSuchEntity,
	"EntityAlreadyExists":     KindEntityAlreadyExists,
	"LimitExceeded":           KindLimitExceeded,
	"LimitExceededException":  KindLimitExceeded,
	"ValidationError":         KindInvalid,
	"InvalidInput":            KindInvalid,
	"MalformedPolicyDocument": KindInvalid,
	// A role that still has policies (DeleteRole deletes ours first: someone else's).
	"DeleteConflict":        KindInvalid,
	"InvalidParameterValue": KindInvalid,
	"Throttling":            KindThrottled,
	"ThrottlingException":   KindThrottled,
	"NotImplemented":        KindNotImplemented,
	"InvalidAction":         KindNotImplemented,
	// Ceph RGW serves IAM only to the users of an account: any other key (a plain
	// RGW user, admin caps or not) gets 405 MethodNotAllowed, which no retry mends.
	"MethodNotAllowed": KindNotImplemented,
}

// Error is a failed IAM call: the operation, the user it concerned, its kind
// and the server's code and message. It never carries a secret: the SDK error
// it wraps is reduced to code and message, and transport errors name no key.
type Error struct {
	Op   string
	User string
	Kind Kind
	Code string
	msg  string
	err  error
	// status is the HTTP status of an answer this package read itself (MinIO's admin
	// API), 0 otherwise.
	status int
}

func (e *Error) Error() string {
	s := "iam " + e.Op
	if e.User != "" {
		s += " " + e.User
	}
	s += ": " + e.Kind.String()
	if e.Code != "" && e.Code != e.Kind.String() {
		s += " (" + e.Code + ")"
	}
	if e.msg != "" {
		s += ": " + e.msg
	}
	return s
}

func (e *Error) Unwrap() error { return e.err }

// KindOf classifies an error of this package; nil and foreign errors are
// KindUnknown.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindUnknown
}

// IsTransient reports whether retrying later may succeed without a change of
// configuration.
func IsTransient(err error) bool {
	switch KindOf(err) {
	case KindUnreachable, KindTimeout, KindThrottled, KindUnknown:
		return err != nil
	}
	return false
}

// wrap turns an SDK error into an *Error.
func wrap(op, user string, err error) error {
	if err == nil {
		return nil
	}
	e := &Error{Op: op, User: user, err: err}
	var apiErr smithy.APIError
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		e.Kind, e.msg = KindTimeout, "no answer before the deadline"
	case errors.Is(err, context.Canceled):
		e.Kind, e.msg = KindTimeout, "canceled"
	case errors.As(err, &apiErr):
		e.Code, e.msg = apiErr.ErrorCode(), apiErr.ErrorMessage()
		e.Kind = codeKinds[e.Code]
		if e.Kind == KindUnknown {
			e.Kind = kindOfStatus(err)
		}
	case errors.As(err, &netErr):
		e.Kind, e.msg = KindUnreachable, netErr.Error()
	default:
		e.Kind, e.msg = kindOfStatus(err), err.Error()
		if e.Kind == KindUnknown && strings.Contains(e.msg, "connect") {
			e.Kind = KindUnreachable
		}
	}
	return e
}

// kindOfStatus classifies an answer without a known code by its HTTP status.
func kindOfStatus(err error) Kind {
	var re *awshttp.ResponseError
	if !errors.As(err, &re) {
		return KindUnknown
	}
	return kindOfHTTPStatus(re.HTTPStatusCode())
}

// kindOfHTTPStatus classifies an answer without a known code by its HTTP status.
func kindOfHTTPStatus(status int) Kind {
	switch status {
	case 403:
		return KindAccessDenied
	case 404:
		return KindNoSuchEntity
	case 409:
		return KindEntityAlreadyExists
	case 429, 503:
		return KindThrottled
	case 405, 501:
		return KindNotImplemented
	case 400:
		return KindInvalid
	}
	return KindUnknown
}
