package awspolicy

import (
	"context"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// Recorder records the requests of the AWS SDK clients it is a middleware of: each
// distinct service, operation and set of conditions once. Its zero value is ready;
// it is safe for concurrent use.
type Recorder struct {
	mu   sync.Mutex
	seen map[string]Request
}

// Middleware adds the recorder to an SDK client's stack: an entry of the client's
// APIOptions (s3.Config.APIOptions, iam.Config.APIOptions). It sits in the Initialize
// step, after the SDK named the operation, where the operation's input is still the
// typed struct the conditions are read from; it records every call that gets that
// far, retries once.
func (r *Recorder) Middleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("bucketkeeperAWSPolicyRecorder",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
			middleware.InitializeOutput, middleware.Metadata, error,
		) {
			r.record(RequestOf(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), in.Parameters))
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

func (r *Recorder) record(req Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]Request{}
	}
	r.seen[req.String()] = req
}

// Requests returns what was recorded, sorted.
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.seen))
	for k := range r.seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Request, 0, len(keys))
	for _, k := range keys {
		out = append(out, r.seen[k])
	}
	return out
}

// Missing is Missing of every recorded request but those of the operations in
// except (a test's own cleanup, say, that the operator never sends), sorted.
func (r *Recorder) Missing(except ...string) []string {
	var out []string
	for _, req := range r.Requests() {
		if !slices.Contains(except, req.Operation) {
			out = append(out, Missing(req)...)
		}
	}
	return slices.Compact(out)
}

// RequestOf is the request of service (the SDK's service ID, "S3"), operation and
// input (the operation's *XxxInput): the conditions are read from the input's
// fields by their SDK names (VersionId, Tagging, ObjectLockMode, ...).
func RequestOf(serviceID, operation string, input any) Request {
	req := Request{Service: strings.ToLower(serviceID), Operation: operation}
	v := reflect.ValueOf(input)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return req
	}
	add := func(c Condition) {
		if !slices.Contains(req.Conditions, c) {
			req.Conditions = append(req.Conditions, c)
		}
	}
	version := func(s reflect.Value) {
		if f := s.FieldByName("VersionId"); f.IsValid() {
			if set(f) {
				add(Versioned)
			} else {
				add(Unversioned)
			}
		}
	}
	version(v)
	// DeleteObjects names its objects, each with or without a version, in Delete.
	if d := deref(v.FieldByName("Delete")); d.IsValid() && d.Kind() == reflect.Struct {
		if objs := d.FieldByName("Objects"); objs.IsValid() && objs.Kind() == reflect.Slice {
			for i := range objs.Len() {
				if o := deref(objs.Index(i)); o.Kind() == reflect.Struct {
					version(o)
				}
			}
		}
	}
	// The fields of the headers that carry tags and a lock on a write, a bypass, and
	// object lock on a new bucket. (PutBucketTagging's Tagging is the bucket's tag
	// set, a struct: not an object's tags.)
	for _, f := range []struct {
		field string
		kind  reflect.Kind
		c     Condition
	}{
		{"Tagging", reflect.String, Tagged}, {"ObjectLockMode", reflect.String, Retention},
		{"ObjectLockRetainUntilDate", reflect.Struct, Retention}, {"ObjectLockLegalHoldStatus", reflect.String, LegalHold},
		{"BypassGovernanceRetention", reflect.Bool, BypassGovernance}, {"ObjectLockEnabledForBucket", reflect.Bool, ObjectLock},
	} {
		if fv := v.FieldByName(f.field); fv.IsValid() && deref(fv).Kind() == f.kind && set(fv) {
			add(f.c)
		}
	}
	slices.Sort(req.Conditions)
	return req
}

// set says whether a field of an SDK input is given: a non-empty string (or string
// enum), a non-nil pointer to anything but false or "".
func set(f reflect.Value) bool {
	switch f.Kind() {
	case reflect.Pointer:
		if f.IsNil() {
			return false
		}
		return set(f.Elem())
	case reflect.String:
		return f.String() != ""
	case reflect.Bool:
		return f.Bool()
	case reflect.Struct:
		return true // a time.Time behind a pointer
	}
	return !f.IsZero()
}

func deref(v reflect.Value) reflect.Value {
	for v.IsValid() && v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}
