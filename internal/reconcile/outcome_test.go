package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

func TestAsStepErrorKinds(t *testing.T) {
	tests := []struct {
		kind     s3.Kind
		reason   string
		terminal bool
	}{
		{s3.KindUnknown, bkv1.ReasonProgressing, false},
		{s3.KindAlreadyOwnedByYou, bkv1.ReasonProgressing, false},
		{s3.KindBucketNameTaken, bkv1.ReasonProgressing, false},
		{s3.KindNotFound, bkv1.ReasonProgressing, false},
		{s3.KindNotEmpty, bkv1.ReasonProgressing, false},
		{s3.KindAccessDenied, bkv1.ReasonAccessDenied, true},
		{s3.KindInvalidCredentials, bkv1.ReasonCredentialsInvalid, true},
		{s3.KindNotImplemented, bkv1.ReasonProgressing, false},
		{s3.KindThrottled, bkv1.ReasonThrottled, false},
		{s3.KindUnreachable, bkv1.ReasonStoreUnreachable, false},
		{s3.KindTLS, bkv1.ReasonTLSError, true},
		{s3.KindTimeout, bkv1.ReasonStoreUnreachable, false},
		{s3.KindCanceled, bkv1.ReasonProgressing, false},
		{s3.KindInvalid, bkv1.ReasonConfigFailed, true},
		{s3.KindServerError, bkv1.ReasonProgressing, false},
	}
	if len(tests) != int(s3.KindServerError)+1 {
		t.Fatalf("table covers %d kinds, s3 has %d", len(tests), int(s3.KindServerError)+1)
	}
	for _, tc := range tests {
		raw := &s3.Error{Op: "HeadBucket", Bucket: "b", Kind: tc.kind}
		for name, err := range map[string]error{
			"bare":    raw,
			"wrapped": fmt.Errorf("outer: %w", raw),
		} {
			t.Run(tc.kind.String()+"/"+name, func(t *testing.T) {
				se := AsStepError(err, "checking bucket")
				if se.Reason != tc.reason || se.Terminal != tc.terminal {
					t.Errorf("asStepError(%v) = reason %q terminal %v, want %q %v", tc.kind, se.Reason, se.Terminal, tc.reason, tc.terminal)
				}
				if se.Waiting {
					t.Error("an S3 error is never Waiting")
				}
				if !errors.Is(se, raw) {
					t.Error("stepError does not wrap the S3 error")
				}
				// Tenants see the summary of every kind, never the store's own text: a
				// network or TLS cause names the store's internals, a server's or an
				// invalid request's message may name anything the store knows.
				want := "checking bucket: " + raw.Summary() + "; the operator's log has the store's message"
				if tc.kind == s3.KindUnreachable || tc.kind == s3.KindTimeout || tc.kind == s3.KindTLS {
					want = "checking bucket: " + raw.Summary() + "; the ObjectStore's status has the details"
				}
				if se.Message != want || se.Error() != want {
					t.Errorf("message = %q / Error() = %q, want %q", se.Message, se.Error(), want)
				}
			})
		}
	}
}

func TestAsStepErrorOther(t *testing.T) {
	plain := errors.New("something odd")
	storeErr := &stores.Error{Reason: bkv1.ReasonCredentialsMissing, Message: "Secret ns/creds not found"}
	tlsStoreErr := &stores.Error{Reason: bkv1.ReasonTLSError, Message: "cannot build a client"}
	step := &StepError{Reason: bkv1.ReasonBucketNotEmpty, Message: "bucket is not empty", Err: plain}
	waiting := Waitingf(bkv1.ReasonObjectStoreNotReady, "waiting for %s", "store")
	terminal := Terminalf(bkv1.ReasonOwnedByAnotherClaim, "owned by %s", "x/y")

	tests := []struct {
		name     string
		err      error
		reason   string
		terminal bool
		waiting  bool
		// same: the very stepError must come back.
		same *StepError
		msg  string
	}{
		{name: "plain error", err: plain, reason: bkv1.ReasonProgressing, msg: "doing it: something odd"},
		{name: "deadline exceeded (raw)", err: context.DeadlineExceeded, reason: bkv1.ReasonStoreUnreachable, msg: "doing it: context deadline exceeded"},
		{name: "canceled (raw)", err: context.Canceled, reason: bkv1.ReasonProgressing},
		{name: "store error", err: storeErr, reason: bkv1.ReasonCredentialsMissing, terminal: true, msg: "Secret ns/creds not found"},
		{name: "wrapped store error", err: fmt.Errorf("ctx: %w", storeErr), reason: bkv1.ReasonCredentialsMissing, terminal: true, msg: "Secret ns/creds not found"},
		{name: "TLS store error", err: tlsStoreErr, reason: bkv1.ReasonTLSError, terminal: true, msg: "cannot build a client"},
		{name: "stepError passes through", err: step, same: step},
		{name: "wrapped stepError passes through", err: fmt.Errorf("reconciling: %w", step), same: step},
		{name: "doubly wrapped stepError passes through", err: fmt.Errorf("a: %w", fmt.Errorf("b: %w", terminal)), same: terminal},
		{name: "waiting stepError passes through", err: waiting, same: waiting},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			se := AsStepError(tc.err, "doing it")
			if tc.same != nil {
				if se != tc.same {
					t.Errorf("asStepError = %+v, want the original %+v", se, tc.same)
				}
				return
			}
			if se.Reason != tc.reason || se.Terminal != tc.terminal || se.Waiting != tc.waiting {
				t.Errorf("asStepError = reason %q terminal %v waiting %v, want %q %v %v", se.Reason, se.Terminal, se.Waiting, tc.reason, tc.terminal, tc.waiting)
			}
			if tc.msg != "" && se.Message != tc.msg {
				t.Errorf("message = %q, want %q", se.Message, tc.msg)
			}
			if !errors.Is(se, tc.err) {
				t.Error("stepError does not wrap the original error")
			}
		})
	}

	t.Run("constructors", func(t *testing.T) {
		if !terminal.Terminal || terminal.Waiting || terminal.Reason != bkv1.ReasonOwnedByAnotherClaim || terminal.Error() != "owned by x/y" {
			t.Errorf("terminalf = %+v", terminal)
		}
		if waiting.Terminal || !waiting.Waiting || waiting.Reason != bkv1.ReasonObjectStoreNotReady || waiting.Error() != "waiting for store" {
			t.Errorf("waitingf = %+v", waiting)
		}
		if got := (&StepError{Err: plain}).Error(); got != "something odd" {
			t.Errorf("Error() without message = %q, want the cause", got)
		}
	})
}

// TestTenantMessagesOmitStoreInternals: a store that cannot be reached gives the tenant's
// condition the operation and the kind of failure, not the store's addresses (which the
// cause text of a network error names); the full text stays on the error for the logs.
func TestTenantMessagesOmitStoreInternals(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now: connection refused
	c, err := s3.New(context.Background(), s3.Config{Endpoint: "http://" + addr, ForcePathStyle: true,
		AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret-example"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.HeadBucket(context.Background(), "team-a-data")
	if s3.KindOf(err) != s3.KindUnreachable {
		t.Fatalf("HeadBucket against a closed port: %v (kind %s), want unreachable", err, s3.KindOf(err))
	}
	se := AsStepError(err, `checking bucket "team-a-data"`)
	if se.Reason != bkv1.ReasonStoreUnreachable {
		t.Errorf("reason = %s, want %s", se.Reason, bkv1.ReasonStoreUnreachable)
	}
	if host, _, _ := net.SplitHostPort(addr); strings.Contains(se.Message, host) || !strings.Contains(se.Message, "HeadBucket") {
		t.Errorf("tenant message %q: want the operation and no store address", se.Message)
	}
	if !strings.Contains(se.Err.Error(), addr) {
		t.Errorf("the full error %q lost the address the logs need", se.Err)
	}
}
