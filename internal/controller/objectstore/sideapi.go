package objectstore

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// sideAPI is an API of a store besides S3 (its IAM, its admin API) whose health the
// store reports in a condition of its own, checked the same way for each.
type sideAPI struct {
	condition string
	// configured says whether the store uses the API; when it does not, the condition
	// is removed.
	configured bool
	// ready is the condition's message when the check passes; failure starts its
	// message when it does not, and unavailable is then its reason unless classify
	// says the operator's identity was refused or its credentials are wrong.
	ready, failure, unavailable string
	check                       func(context.Context) error
	classify                    func(error) (denied, invalidCredentials bool)
}

// checkSideAPI sets api's condition on store from one check.
func checkSideAPI(ctx context.Context, store *bkv1.ObjectStore, api sideAPI) {
	if !api.configured {
		reconcile.RemoveCondition(&store.Status.Conditions, api.condition)
		return
	}
	status, reason, message := metav1.ConditionTrue, bkv1.ReasonReady, api.ready
	if err := api.check(ctx); err != nil {
		status, reason, message = metav1.ConditionFalse, api.unavailable, fmt.Sprintf("%s: %v", api.failure, err)
		switch denied, invalid := api.classify(err); {
		case denied:
			reason = bkv1.ReasonAccessDenied
		case invalid:
			reason = bkv1.ReasonCredentialsInvalid
		}
	}
	reconcile.SetCondition(&store.Status.Conditions, store.Generation, api.condition, status, reason, message)
}
