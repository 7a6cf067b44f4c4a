package reconcile

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// This file is the one place that says what a failure means for the conditions: which
// reason a person reads, whether retrying can help, and what a store's failed health
// check does to the buckets on it. The reconcilers look verdicts up here instead of
// switching on error kinds themselves, so a kind reads the same everywhere.

// KindVerdict is what one class of failed S3 call (s3.Kind) means.
type KindVerdict struct {
	// Reason is the condition reason of a reconcile step that failed this way.
	Reason string
	// Terminal: retrying cannot help, a person must change something (Stalled=True);
	// otherwise the step is retried with backoff (Reconciling=True).
	Terminal bool
	// StoreDetail: the error's cause names the store's addresses or TLS chain, which
	// are the platform team's to read; a tenant's condition carries the summary.
	StoreDetail bool
	// Health is the ObjectStore's Ready reason when its health check fails this way.
	// ReasonReady: the answer itself proves that the store works and accepts the
	// credentials.
	Health string
	// HealthMessage heads the ObjectStore's Ready message for such a health check.
	HealthMessage string
	// Probe is the Available reason when a bucket's probe fails this way; empty means
	// ReasonProbeFailed. Only ReasonStoreUnreachable leaves Available Unknown: the
	// probe learned nothing about the bucket.
	Probe string
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

// KindVerdicts holds a verdict for every s3.Kind; TestKindVerdicts checks that none is
// missing.
var KindVerdicts = [...]KindVerdict{
	s3.KindUnknown:           {Reason: bkv1.ReasonProgressing, Health: bkv1.ReasonStoreUnreachable, HealthMessage: healthNoAnswer},
	s3.KindAlreadyOwnedByYou: {Reason: bkv1.ReasonProgressing, Health: bkv1.ReasonStoreUnreachable, HealthMessage: healthNoAnswer},
	s3.KindBucketNameTaken:   {Reason: bkv1.ReasonProgressing, Health: bkv1.ReasonStoreUnreachable, HealthMessage: healthNoAnswer},
	s3.KindNotFound:          {Reason: bkv1.ReasonProgressing, Health: bkv1.ReasonStoreUnreachable, HealthMessage: healthNoAnswer, Probe: bkv1.ReasonBucketNotFound},
	s3.KindNotEmpty:          {Reason: bkv1.ReasonProgressing, Health: bkv1.ReasonStoreUnreachable, HealthMessage: healthNoAnswer},
	s3.KindAccessDenied: {Reason: bkv1.ReasonAccessDenied, Terminal: true,
		Health: bkv1.ReasonReady, HealthMessage: healthDeniedButSigned, Probe: bkv1.ReasonAccessDenied},
	// Only an unknown key or a wrong signature makes the credentials invalid.
	s3.KindInvalidCredentials: {Reason: bkv1.ReasonCredentialsInvalid, Terminal: true,
		Health: bkv1.ReasonCredentialsInvalid, HealthMessage: "the store rejected the credentials", Probe: bkv1.ReasonAccessDenied},
	s3.KindNotImplemented: {Reason: bkv1.ReasonProgressing, Health: bkv1.ReasonStoreUnreachable, HealthMessage: healthNoAnswer},
	s3.KindThrottled:      {Reason: bkv1.ReasonThrottled, Health: bkv1.ReasonStoreUnreachable, HealthMessage: healthNoAnswer},
	s3.KindUnreachable: {Reason: bkv1.ReasonStoreUnreachable, StoreDetail: true,
		Health: bkv1.ReasonStoreUnreachable, HealthMessage: healthNoAnswer, Probe: bkv1.ReasonStoreUnreachable},
	// A TLS failure needs a change of the store's trust settings: no retry fixes it.
	s3.KindTLS: {Reason: bkv1.ReasonTLSError, Terminal: true, StoreDetail: true,
		Health: bkv1.ReasonTLSError, HealthMessage: "TLS handshake with the store failed"},
	s3.KindTimeout: {Reason: bkv1.ReasonStoreUnreachable, StoreDetail: true,
		Health: bkv1.ReasonStoreUnreachable, HealthMessage: healthNoAnswer, Probe: bkv1.ReasonProbeTimeout},
	s3.KindCanceled: {Reason: bkv1.ReasonProgressing, Health: bkv1.ReasonStoreUnreachable, HealthMessage: healthNoAnswer},
	// A request the store refuses as malformed (bad name, policy, region) fails the
	// same way until the spec or the store's settings change.
	s3.KindInvalid:     {Reason: bkv1.ReasonConfigFailed, Terminal: true, Health: bkv1.ReasonStoreUnreachable, HealthMessage: healthNoAnswer},
	s3.KindServerError: {Reason: bkv1.ReasonProgressing, Health: bkv1.ReasonStoreUnreachable, HealthMessage: healthNoAnswer},
}

// VerdictOf returns the verdict for kind; a kind this table does not know (a newer
// s3 package) is treated like KindUnknown: retried.
func VerdictOf(kind s3.Kind) KindVerdict {
	if kind >= 0 && int(kind) < len(KindVerdicts) && KindVerdicts[kind].Reason != "" {
		return KindVerdicts[kind]
	}
	return KindVerdicts[s3.KindUnknown]
}

// HealthVerdict turns the answer to a health check into the store's Ready reason and
// message.
func HealthVerdict(err error) (reason, message string) {
	if err == nil {
		return bkv1.ReasonReady, "the store answers and accepts the credentials"
	}
	v := VerdictOf(s3.KindOf(err))
	if v.Health == bkv1.ReasonReady {
		return v.Health, v.HealthMessage
	}
	return v.Health, fmt.Sprintf("%s: %v", v.HealthMessage, err)
}

// ProbeVerdictOf is the Available condition of a bucket whose probe failed with err.
// A probe that ran out of its own time is a timeout, unless the store answered that the
// bucket is missing or the request refused.
func ProbeVerdictOf(ctx context.Context, err error) (metav1.ConditionStatus, string) {
	reason := VerdictOf(s3.KindOf(err)).Probe
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

// StoreVerdict is what an ObjectStore's Ready=False reason means for the store and for
// the buckets on it.
type StoreVerdict struct {
	// Terminal: a person must fix the store (credentials, trust). The store is
	// Stalled, and its buckets stall with the same reason instead of waiting.
	Terminal bool
	// BucketReason is the reason buckets wait with while the store is not terminal:
	// the store's watch wakes them once it recovers.
	BucketReason string
	// BucketMessage says, in a tenant's words, what is wrong with the store; empty:
	// "is not ready (<reason>)".
	BucketMessage string
}

// storeVerdicts holds the ObjectStore Ready reasons that need a verdict of their own;
// every other reason is notReadyVerdict.
var storeVerdicts = map[string]StoreVerdict{
	bkv1.ReasonCredentialsMissing: {Terminal: true},
	bkv1.ReasonCredentialsInvalid: {Terminal: true},
	bkv1.ReasonTLSError:           {Terminal: true},
	bkv1.ReasonStoreUnreachable: {BucketReason: bkv1.ReasonStoreUnreachable,
		BucketMessage: "is unreachable"},
}

// notReadyVerdict: the store is not ready for another reason (not yet checked, a
// transient failure to build its client); the next health check may well succeed.
var notReadyVerdict = StoreVerdict{BucketReason: bkv1.ReasonObjectStoreNotReady}

// StoreVerdictOf returns the verdict for an ObjectStore's Ready=False reason.
func StoreVerdictOf(reason string) StoreVerdict {
	if v, ok := storeVerdicts[reason]; ok {
		return v
	}
	return notReadyVerdict
}

// guardrailReasons are the refusals of the platform team's guardrails: a claim refused
// for one of them is Stalled whatever else it asks, suspended or not, and its keys are
// revoked (the BucketAccess controller follows its Ready condition).
var guardrailReasons = map[string]bool{
	bkv1.ReasonNamespaceNotAllowed:      true,
	bkv1.ReasonBucketNameNotAllowed:     true,
	bkv1.ReasonDeletionPolicyNotAllowed: true,
	bkv1.ReasonInvalidTags:              true,
	bkv1.ReasonPublicAccessNotAllowed:   true,
	bkv1.ReasonPolicyNotAllowed:         true,
	bkv1.ReasonAdoptionNotAllowed:       true,
	bkv1.ReasonObjectLockNotAllowed:     true,
	// The claim is refused by one of the two above, and what it forbids could not be
	// taken from the bucket.
	bkv1.ReasonWithdrawalRefused: true,
}

// IsGuardrailRefusal says whether reason is the refusal of one of the platform team's
// guardrails (see guardrailReasons).
func IsGuardrailRefusal(reason string) bool { return guardrailReasons[reason] }
