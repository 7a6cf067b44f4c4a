package storagebucket

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

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
		{name: "spec wins over status", spec: "explicit", status: "recorded", prefix: "acme", want: "explicit"},
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

func TestLeftByEarlierIncarnation(t *testing.T) {
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "data", UID: "new-uid"}}
	apiVersion := bkv1.GroupVersion.String()
	ref := func(mutate func(*metav1.OwnerReference)) []metav1.OwnerReference {
		r := metav1.OwnerReference{APIVersion: apiVersion, Kind: "StorageBucket", Name: "data", UID: "old-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
		if mutate != nil {
			mutate(&r)
		}
		return []metav1.OwnerReference{r}
	}
	managed := map[string]string{bkv1.LabelManagedBy: bkv1.LabelManagedByValue, bkv1.LabelSecretRole: bkv1.SecretRoleConnection, bkv1.LabelStorageBucket: "data"}
	tests := []struct {
		name   string
		owners []metav1.OwnerReference
		labels map[string]string
		want   bool
	}{
		{"left by the earlier StorageBucket", ref(nil), managed, true},
		{"other version of the same group", ref(func(r *metav1.OwnerReference) { r.APIVersion = "bucketkeeper.io/v1" }), managed, true},
		{"no owner", nil, managed, false},
		{"owner but not controller", ref(func(r *metav1.OwnerReference) { r.Controller = nil }), managed, false},
		{"owner with controller false", ref(func(r *metav1.OwnerReference) { r.Controller = ptr.To(false) }), managed, false},
		{"controlled by this StorageBucket (not an earlier one)", ref(func(r *metav1.OwnerReference) { r.UID = sb.UID }), managed, false},
		{"controlled by another StorageBucket", ref(func(r *metav1.OwnerReference) { r.Name = "other" }), managed, false},
		{"controlled by another kind", ref(func(r *metav1.OwnerReference) { r.Kind = "ObjectStore" }), managed, false},
		{"controlled by a same-named kind of another group", ref(func(r *metav1.OwnerReference) { r.APIVersion = "example.com/v1" }), managed, false},
		{"group that merely ends like ours", ref(func(r *metav1.OwnerReference) { r.APIVersion = "notbucketkeeper.io/v1alpha1" }), managed, false},
		{"group that merely starts like ours", ref(func(r *metav1.OwnerReference) { r.APIVersion = "bucketkeeper.io.evil/v1alpha1" }), managed, false},
		{"core-group style apiVersion", ref(func(r *metav1.OwnerReference) { r.APIVersion = "v1" }), managed, false},
		{"no labels", ref(nil), nil, false},
		{"managed by someone else", ref(nil), map[string]string{bkv1.LabelManagedBy: "helm"}, false},
		{"only the managed-by label", ref(nil), map[string]string{bkv1.LabelManagedBy: bkv1.LabelManagedByValue}, true},
		{"non-controller owner plus earlier controller", append(
			[]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "cm"}}, ref(nil)...), managed, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sb.Namespace, Name: "data-bucket", Labels: tc.labels, OwnerReferences: tc.owners}}
			if got := leftByEarlierIncarnation(s, sb); got != tc.want {
				t.Errorf("leftByEarlierIncarnation = %v, want %v", got, tc.want)
			}
		})
	}
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
	se := reconcile.AsStepError(err, `checking bucket "team-a-data"`)
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
