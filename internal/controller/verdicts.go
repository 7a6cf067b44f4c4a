package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// This file is the one place that says what a failure means for the conditions: which
// reason a person reads, whether retrying can help, and what a store's failed health
// check does to the buckets on it. The reconcilers look verdicts up here instead of
// switching on error kinds themselves, so a kind reads the same everywhere.

// kindVerdict is what one class of failed S3 call (s3.Kind) means.
type kindVerdict struct {
	// reason is the condition reason of a reconcile step that failed this way.
	reason string
	// terminal: retrying cannot help, a person must change something (Stalled=True);
	// otherwise the step is retried with backoff (Reconciling=True).
	terminal bool
	// storeDetail: the error's cause names the store's addresses or TLS chain, which
	// are the platform team's to read; a tenant's condition carries the summary.
	storeDetail bool
	// health is the ObjectStore's Ready reason when its health check fails this way.
	// ReasonReady: the answer itself proves that the store works and accepts the
	// credentials.
	health string
	// healthMessage heads the ObjectStore's Ready message for such a health check.
	healthMessage string
	// probe is the Available reason when a bucket's probe fails this way; empty means
	// ReasonProbeFailed. Only ReasonStoreUnreachable leaves Available Unknown: the
	// probe learned nothing about the bucket.
	probe string
}

// Health-check messages shared by several kinds.
const (
	healthNoAnswer = "the store did not answer the health check"
	// A store answers AccessDenied only after it has verified the signature, so the
	// credentials are good; the identity is just not allowed to list buckets
	// (s3:ListAllMyBuckets on AWS), which least-privilege setups commonly leave out
	// and which the operator does not need.
	healthDeniedButSigned = "the store answers and accepts the credentials (the signature was verified); " +
		"the identity may not list buckets (s3:ListAllMyBuckets), which bucketkeeper does not need"
)

// kindVerdicts holds a verdict for every s3.Kind; TestKindVerdicts checks that none is
// missing.
var kindVerdicts = [...]kindVerdict{
	s3.KindUnknown:           {reason: bkv1.ReasonProgressing, health: bkv1.ReasonStoreUnreachable, healthMessage: healthNoAnswer},
	s3.KindAlreadyOwnedByYou: {reason: bkv1.ReasonProgressing, health: bkv1.ReasonStoreUnreachable, healthMessage: healthNoAnswer},
	s3.KindBucketNameTaken:   {reason: bkv1.ReasonProgressing, health: bkv1.ReasonStoreUnreachable, healthMessage: healthNoAnswer},
	s3.KindNotFound:          {reason: bkv1.ReasonProgressing, health: bkv1.ReasonStoreUnreachable, healthMessage: healthNoAnswer, probe: bkv1.ReasonBucketNotFound},
	s3.KindNotEmpty:          {reason: bkv1.ReasonProgressing, health: bkv1.ReasonStoreUnreachable, healthMessage: healthNoAnswer},
	s3.KindAccessDenied: {reason: bkv1.ReasonAccessDenied, terminal: true,
		health: bkv1.ReasonReady, healthMessage: healthDeniedButSigned, probe: bkv1.ReasonAccessDenied},
	// Only an unknown key or a wrong signature makes the credentials invalid.
	s3.KindInvalidCredentials: {reason: bkv1.ReasonCredentialsInvalid, terminal: true,
		health: bkv1.ReasonCredentialsInvalid, healthMessage: "the store rejected the credentials", probe: bkv1.ReasonAccessDenied},
	s3.KindNotImplemented: {reason: bkv1.ReasonProgressing, health: bkv1.ReasonStoreUnreachable, healthMessage: healthNoAnswer},
	s3.KindThrottled:      {reason: bkv1.ReasonThrottled, health: bkv1.ReasonStoreUnreachable, healthMessage: healthNoAnswer},
	s3.KindUnreachable: {reason: bkv1.ReasonStoreUnreachable, storeDetail: true,
		health: bkv1.ReasonStoreUnreachable, healthMessage: healthNoAnswer, probe: bkv1.ReasonStoreUnreachable},
	// A TLS failure needs a change of the store's trust settings: no retry fixes it.
	s3.KindTLS: {reason: bkv1.ReasonTLSError, terminal: true, storeDetail: true,
		health: bkv1.ReasonTLSError, healthMessage: "TLS handshake with the store failed"},
	s3.KindTimeout: {reason: bkv1.ReasonStoreUnreachable, storeDetail: true,
		health: bkv1.ReasonStoreUnreachable, healthMessage: healthNoAnswer, probe: bkv1.ReasonProbeTimeout},
	s3.KindCanceled: {reason: bkv1.ReasonProgressing, health: bkv1.ReasonStoreUnreachable, healthMessage: healthNoAnswer},
	// A request the store refuses as malformed (bad name, policy, region) fails the
	// same way until the spec or the store's settings change.
	s3.KindInvalid:     {reason: bkv1.ReasonConfigFailed, terminal: true, health: bkv1.ReasonStoreUnreachable, healthMessage: healthNoAnswer},
	s3.KindServerError: {reason: bkv1.ReasonProgressing, health: bkv1.ReasonStoreUnreachable, healthMessage: healthNoAnswer},
}

// verdictOf returns the verdict for kind; a kind this table does not know (a newer
// s3 package) is treated like KindUnknown: retried.
func verdictOf(kind s3.Kind) kindVerdict {
	if kind >= 0 && int(kind) < len(kindVerdicts) && kindVerdicts[kind].reason != "" {
		return kindVerdicts[kind]
	}
	return kindVerdicts[s3.KindUnknown]
}

// probeVerdictOf is the Available condition of a bucket whose probe failed with err.
// A probe that ran out of its own time is a timeout, unless the store answered that the
// bucket is missing or the request refused.
func probeVerdictOf(ctx context.Context, err error) (metav1.ConditionStatus, string) {
	reason := verdictOf(s3.KindOf(err)).probe
	switch {
	case ctx.Err() != nil && (reason == "" || reason == bkv1.ReasonStoreUnreachable):
		reason = bkv1.ReasonProbeTimeout
	case reason == "":
		reason = bkv1.ReasonProbeFailed
	}
	if reason == bkv1.ReasonStoreUnreachable {
		return metav1.ConditionUnknown, reason
	}
	return metav1.ConditionFalse, reason
}

// storeVerdict is what an ObjectStore's Ready=False reason means for the store and for
// the buckets on it.
type storeVerdict struct {
	// terminal: a person must fix the store (credentials, trust). The store is
	// Stalled, and its buckets stall with the same reason instead of waiting.
	terminal bool
	// bucketReason is the reason buckets wait with while the store is not terminal:
	// the store's watch wakes them once it recovers.
	bucketReason string
	// bucketMessage says, in a tenant's words, what is wrong with the store; empty:
	// "is not ready (<reason>)".
	bucketMessage string
}

// storeVerdicts holds the ObjectStore Ready reasons that need a verdict of their own;
// every other reason is notReadyVerdict.
var storeVerdicts = map[string]storeVerdict{
	bkv1.ReasonCredentialsMissing: {terminal: true},
	bkv1.ReasonCredentialsInvalid: {terminal: true},
	bkv1.ReasonTLSError:           {terminal: true},
	bkv1.ReasonStoreUnreachable: {bucketReason: bkv1.ReasonStoreUnreachable,
		bucketMessage: "is unreachable"},
}

// notReadyVerdict: the store is not ready for another reason (not yet checked, a
// transient failure to build its client); the next health check may well succeed.
var notReadyVerdict = storeVerdict{bucketReason: bkv1.ReasonObjectStoreNotReady}

// storeVerdictOf returns the verdict for an ObjectStore's Ready=False reason.
func storeVerdictOf(reason string) storeVerdict {
	if v, ok := storeVerdicts[reason]; ok {
		return v
	}
	return notReadyVerdict
}
