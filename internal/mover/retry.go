package mover

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// What a failed call means for a move. A mover does not give up on a store that is
// down or slow: it waits it out (retryTransient) for as long as its pass may run, and
// the checkpoint keeps what was done. What no retry fixes is either one key's problem
// (recorded as a Failure, the pass goes on with the other keys) or the move's
// (credentials, TLS, a missing bucket: the pass stops with the error).

// Backoff of retryTransient: from retryFirst, doubling, at most retryMax apart.
var (
	retryFirst = 500 * time.Millisecond
	retryMax   = 15 * time.Second
)

// transient says whether retrying err later may succeed: the store did not answer,
// was slow, throttled us or failed on its side.
func transient(err error) bool {
	var e *s3.Error
	if !errors.As(err, &e) || changedUnderUs(err) {
		return false // the mover's own verdicts (a checked part that differs) stand
	}
	switch e.Kind {
	case s3.KindUnreachable, s3.KindTimeout, s3.KindThrottled, s3.KindServerError:
		return true
	case s3.KindUnknown:
		// No answer, or one of the store's own 5xx; a 4xx the classifier does not
		// know (Versity's 409 ObjectParentIsFile) is the key's and stays so.
		return e.StatusCode == 0 || e.StatusCode >= 500
	}
	return false
}

// retryTransient runs fn until it succeeds, fails in a way retrying cannot fix, or
// ctx ends.
func retryTransient(ctx context.Context, fn func() error) error {
	wait := retryFirst
	for {
		err := fn()
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, retryMax)
	}
}

// fatal says whether err stops the whole move rather than one key: the store refuses
// the credentials or the TLS handshake, or a bucket is gone.
func fatal(err error) bool {
	var e *s3.Error
	if errors.As(err, &e) && e.Code == "NoSuchBucket" {
		return true
	}
	var full *equivalencesFull
	switch {
	case errors.As(err, &full), errors.Is(err, ErrSuperseded):
		return true
	}
	switch s3.KindOf(err) {
	case s3.KindInvalidCredentials, s3.KindTLS, s3.KindCanceled:
		return true
	}
	return false
}

// changedUnderUs says whether err means the source object is not what the listing
// said any more: replaced (412 to If-Match, or bytes whose MD5 is not the listed
// ETag) or deleted. The next pass lists it again.
func changedUnderUs(err error) bool {
	var e *s3.Error
	if s3.ChangedSince(err) || (errors.As(err, &e) && e.Code == "BadDigest") {
		return true
	}
	var c *changedError
	if errors.As(err, &c) {
		return true
	}
	return errors.As(err, &e) && e.Kind == s3.KindNotFound && (e.Code == "NoSuchKey" || e.Code == "NoSuchVersion" || e.Code == "NotFound" || e.Code == "")
}

// changedError is a source object that turned out different from its listing.
type changedError struct{ msg string }

func (e *changedError) Error() string { return e.msg }

// equivalencesFull is equivalences.add's error: the shard needs more records than a
// checkpoint holds.
type equivalencesFull struct{ error }

// sideError is an error of one side's store, so a failure says which store refused.
type sideError struct {
	side string
	err  error
}

func (e *sideError) Error() string { return e.side + ": " + e.err.Error() }
func (e *sideError) Unwrap() error { return e.err }

// onSource and onTarget mark err as the source's or the target's (nil stays nil).
func onSource(err error) error { return onSide(SideSource, err) }
func onTarget(err error) error { return onSide(SideTarget, err) }

func onSide(side string, err error) error {
	var already *sideError
	if err == nil || errors.As(err, &already) {
		return err
	}
	return &sideError{side: side, err: err}
}

// reason is what a failure says where tenants read it (a key's Failure, a stopped
// run's LastError, both shown in the claim's status): which side, and what the store
// answered (operation, kind, code and status: s3.Error's Summary), or for a failure
// with no answer the kind alone (Unreachable, TLS, Timeout). Never the store's own
// text or a transport error's, which name the store's addresses, its TLS chain or
// internal paths and are the store admin's to read: the mover's log has the whole
// error. The mover's own errors say what it found in its own words.
func reason(err error) string {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var parts []string
		for _, e := range joined.Unwrap() {
			if e != nil {
				parts = append(parts, reason(e))
			}
		}
		return strings.Join(parts, "; ")
	}
	side := "mover"
	var se *sideError
	if errors.As(err, &se) {
		side = se.side
	}
	var e *s3.Error
	if errors.As(err, &e) {
		return fmt.Sprintf("%s: %s", side, e.Summary())
	}
	var ue *url.Error
	if kind := s3.KindOf(err); kind != s3.KindUnknown || errors.As(err, &ue) {
		return fmt.Sprintf("%s: %s", side, kind)
	}
	if se != nil {
		return se.Error()
	}
	return fmt.Sprintf("%s: %v", side, err)
}

// quoteKey quotes a key for a message, shortened past 200 characters.
func quoteKey(k string) string {
	if len(k) > 200 {
		k = k[:200] + "..."
	}
	return strconv.Quote(k)
}
