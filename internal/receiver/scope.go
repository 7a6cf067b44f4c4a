package receiver

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/types"
)

// resolve maps a parsed target to the StorageBuckets the key reaches. A non-zero
// status means nothing matched (404) or more than MaxBucketsPerRequest StorageBuckets
// did (400: each costs an API write); err is a Requester failure.
//
// A StorageBucket outside the key's namespaces is never looked at: a direct request
// naming one is answered 404 without a lookup, exactly as for one that does not exist,
// and a bucket name is looked up only in the key's namespaces, so the claims other
// namespaces have on it are neither read, nor counted towards the 400, nor named in
// the answer. The answers, the Requester calls and the budget spent are then the same
// whether or not such a claim exists. The filter after each lookup guards the same
// promise against a Requester that returns more than it was asked for.
func (r *Receiver) resolve(ctx context.Context, t target, key *keyEntry) ([]types.NamespacedName, int, error) {
	if t.key != nil {
		if !key.allows(t.key.Namespace) {
			return nil, http.StatusNotFound, nil
		}
		ok, err := r.requester.Exists(ctx, *t.key)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			return nil, http.StatusNotFound, nil
		}
		return []types.NamespacedName{*t.key}, 0, nil
	}
	var keys []types.NamespacedName
	seen := map[types.NamespacedName]bool{}
	for _, bucket := range t.buckets {
		for _, ns := range key.lookupNamespaces() {
			found, err := r.requester.BucketsNamed(ctx, bucket, ns)
			if err != nil {
				return nil, 0, err
			}
			for _, k := range found {
				if !key.allows(k.Namespace) || (ns != "" && k.Namespace != ns) || seen[k] {
					continue
				}
				seen[k] = true
				keys = append(keys, k)
			}
			if len(keys) > MaxBucketsPerRequest {
				return nil, http.StatusBadRequest, nil
			}
		}
	}
	if len(keys) == 0 {
		return nil, http.StatusNotFound, nil
	}
	return keys, 0, nil
}
