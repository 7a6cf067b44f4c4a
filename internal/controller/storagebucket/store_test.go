package storagebucket

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// TestStoreVerdicts: what a store's Ready reason does to the buckets on it.
func TestStoreVerdicts(t *testing.T) {
	tests := []struct {
		reason   string
		terminal bool
		// bucketReason is the reason a bucket waits with when not terminal.
		bucketReason string
	}{
		{bkv1.ReasonCredentialsMissing, true, ""},
		{bkv1.ReasonCredentialsInvalid, true, ""},
		{bkv1.ReasonTLSError, true, ""},
		{bkv1.ReasonStoreUnreachable, false, bkv1.ReasonStoreUnreachable},
		{bkv1.ReasonConfigFailed, false, bkv1.ReasonObjectStoreNotReady},
		{bkv1.ReasonProgressing, false, bkv1.ReasonObjectStoreNotReady},
		{bkv1.ReasonForbidden, false, bkv1.ReasonObjectStoreNotReady},
	}
	for _, tc := range tests {
		t.Run(tc.reason, func(t *testing.T) {
			store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "s3", Generation: 2}}
			reconcile.SetCondition(&store.Status.Conditions, 2, bkv1.ConditionReady, metav1.ConditionFalse, tc.reason, "details for the admin")
			se := reconcile.AsStepError(storeHealth(store), "checking the ObjectStore")
			switch {
			case tc.terminal:
				if !se.Terminal || se.Waiting || se.Reason != tc.reason {
					t.Errorf("storeHealth = %+v, want terminal with reason %s", se, tc.reason)
				}
			default:
				if se.Terminal || !se.Waiting || se.Reason != tc.bucketReason {
					t.Errorf("storeHealth = %+v, want waiting with reason %s", se, tc.bucketReason)
				}
			}
			if strings.Contains(se.Message, "details for the admin") {
				t.Errorf("the store's own message reached the bucket: %q", se.Message)
			}
		})
	}
}

func TestStoreHealth(t *testing.T) {
	const gen = 3
	ready := func(status metav1.ConditionStatus, reason, msg string, observed int64) []metav1.Condition {
		return []metav1.Condition{{Type: bkv1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: observed}}
	}
	type want struct {
		ok       bool
		reason   string
		terminal bool
		waiting  bool
		// keeps: a verified bucket keeps its verdict (the store's spec is not checked).
		keeps    bool
		mentions []string
	}
	// The store's own message names its internals (addresses, TLS chains): a bucket's
	// condition gives the reason and points to the store, never the message itself.
	const internals = "INTERNAL-10.0.0.7"
	tests := []struct {
		name  string
		conds []metav1.Condition
		want  want
	}{
		{"no conditions", nil,
			want{reason: bkv1.ReasonObjectStoreNotReady, waiting: true, keeps: true, mentions: []string{"to be checked"}}},
		{"only other conditions", []metav1.Condition{{Type: bkv1.ConditionStalled, Status: metav1.ConditionFalse, Reason: "x", ObservedGeneration: gen}},
			want{reason: bkv1.ReasonObjectStoreNotReady, waiting: true, keeps: true, mentions: []string{"to be checked"}}},
		{"Ready True for an older generation", ready(metav1.ConditionTrue, bkv1.ReasonReady, "ok", gen-1),
			want{reason: bkv1.ReasonObjectStoreNotReady, waiting: true, keeps: true, mentions: []string{"to be checked"}}},
		{"CredentialsInvalid for an older generation", ready(metav1.ConditionFalse, bkv1.ReasonCredentialsInvalid, "bad", gen-1),
			want{reason: bkv1.ReasonObjectStoreNotReady, waiting: true, keeps: true, mentions: []string{"to be checked"}}},
		{"Ready True", ready(metav1.ConditionTrue, bkv1.ReasonReady, "ok", gen),
			want{ok: true}},
		{"StoreUnreachable", ready(metav1.ConditionFalse, bkv1.ReasonStoreUnreachable, "connection refused "+internals, gen),
			want{reason: bkv1.ReasonStoreUnreachable, waiting: true, mentions: []string{"unreachable", "its status"}}},
		{"CredentialsInvalid", ready(metav1.ConditionFalse, bkv1.ReasonCredentialsInvalid, "rejected "+internals, gen),
			want{reason: bkv1.ReasonCredentialsInvalid, terminal: true, mentions: []string{bkv1.ReasonCredentialsInvalid, "its status"}}},
		{"CredentialsMissing", ready(metav1.ConditionFalse, bkv1.ReasonCredentialsMissing, "no Secret "+internals, gen),
			want{reason: bkv1.ReasonCredentialsMissing, terminal: true, mentions: []string{bkv1.ReasonCredentialsMissing, "its status"}}},
		{"TLSError", ready(metav1.ConditionFalse, bkv1.ReasonTLSError, "unknown authority "+internals, gen),
			want{reason: bkv1.ReasonTLSError, terminal: true, mentions: []string{bkv1.ReasonTLSError, "its status"}}},
		{"other reason (InUse)", ready(metav1.ConditionFalse, bkv1.ReasonInUse, "deletion waits "+internals, gen),
			want{reason: bkv1.ReasonObjectStoreNotReady, waiting: true, mentions: []string{"not ready", bkv1.ReasonInUse}}},
		{"Unknown status", ready(metav1.ConditionUnknown, bkv1.ReasonProgressing, "checking "+internals, gen),
			want{reason: bkv1.ReasonObjectStoreNotReady, waiting: true, mentions: []string{"not ready", bkv1.ReasonProgressing}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "minio", Generation: gen}}
			store.Status.Conditions = tc.conds
			err := storeHealth(store)
			if tc.want.ok {
				if err != nil {
					t.Fatalf("storeHealth = %v, want nil", err)
				}
				return
			}
			var se *reconcile.StepError
			if !errors.As(err, &se) {
				t.Fatalf("storeHealth = %v (%T), want a *stepError", err, err)
			}
			if se.Reason != tc.want.reason || se.Terminal != tc.want.terminal || se.Waiting != tc.want.waiting || se.KeepsVerdict != tc.want.keeps {
				t.Errorf("storeHealth = reason %q terminal %v waiting %v keeps %v, want %q %v %v %v",
					se.Reason, se.Terminal, se.Waiting, se.KeepsVerdict, tc.want.reason, tc.want.terminal, tc.want.waiting, tc.want.keeps)
			}
			for _, m := range append([]string{`"minio"`}, tc.want.mentions...) {
				if !strings.Contains(se.Message, m) {
					t.Errorf("message %q does not mention %q", se.Message, m)
				}
			}
			if strings.Contains(se.Message, internals) {
				t.Errorf("message %q copies the store's own message", se.Message)
			}
			// Whatever the verdict, asStepError keeps it (the caller's conversion).
			if again := reconcile.AsStepError(err, "x"); again != se {
				t.Errorf("asStepError changed the verdict: %+v", again)
			}
		})
	}
}

func TestBucketNameFor(t *testing.T) {
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: bkv1.ObjectStoreSpec{BucketNamePrefix: "acme"}}
	derived := naming.BucketName("acme", "team-a", "data")
	tests := []struct {
		name   string
		spec   string
		status string
		prefix string
		want   string
	}{
		{name: "spec as recorded", spec: "explicit", status: "explicit", prefix: "acme", want: "explicit"},
		// spec.bucketName is immutable: the two differ only once a move renamed the
		// bucket into its new home's lane (spec.move.bucketName: Lane).
		{name: "status, renamed by a move, wins over spec", spec: "explicit", status: "recorded", prefix: "acme", want: "recorded"},
		{name: "spec wins over derived", spec: "explicit", prefix: "acme", want: "explicit"},
		{name: "status wins over derived", status: "recorded", prefix: "acme", want: "recorded"},
		{name: "status survives a change of prefix", status: derived, prefix: "other", want: derived},
		{name: "derived", prefix: "acme", want: derived},
		{name: "derived without prefix", prefix: "", want: naming.BucketName("", "team-a", "data")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "data"}}
			sb.Spec.BucketName = tc.spec
			sb.Status.BucketName = tc.status
			s := store.DeepCopy()
			s.Spec.BucketNamePrefix = tc.prefix
			got := bucketNameFor(sb, s)
			if got != tc.want {
				t.Errorf("bucketNameFor = %q, want %q", got, tc.want)
			}
			if err := naming.Validate(got); err != nil && tc.spec == "" && tc.status == "" {
				t.Errorf("derived name is invalid: %v", err)
			}
		})
	}
	if a, b := bucketNameFor(&bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "a-b", Name: "c"}}, store),
		bucketNameFor(&bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "b-c"}}, store); a == b {
		t.Errorf("two claims derive the same bucket %q", a)
	}
}

func TestBucketNameForConnectionSecret(t *testing.T) {
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "data"}}
	if got := connectionSecretName(sb); got != "data-bucket" {
		t.Errorf("default connection Secret name = %q, want data-bucket", got)
	}
	sb.Spec.ConnectionSecret.Name = "app-s3"
	if got := connectionSecretName(sb); got != "app-s3" {
		t.Errorf("connection Secret name = %q, want app-s3", got)
	}
}
