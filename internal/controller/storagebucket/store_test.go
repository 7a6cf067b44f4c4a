package storagebucket

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
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
