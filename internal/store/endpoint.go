package store

import (
	"fmt"
	"strconv"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// Endpoint is the URL applications use: the store's endpoint, or AWS's regional one.
func Endpoint(store *bkv1.ObjectStore, region string) string {
	if store.Spec.Endpoint != "" {
		return store.Spec.Endpoint
	}
	return fmt.Sprintf("https://s3.%s.amazonaws.com", region)
}

// AddTransport adds what a client needs besides the endpoint to talk to the store
// the way the operator does: the CA bundle it trusts and the addressing style. Without
// them an application of a self-hosted store with a private CA or without wildcard DNS
// cannot connect with the Secret alone.
func AddTransport(data map[string][]byte, store *bkv1.ObjectStore) {
	data[bkv1.SecretKeyForcePathStyle] = []byte(strconv.FormatBool(store.Spec.ForcePathStyle))
	if store.Spec.CABundle != "" {
		data[bkv1.SecretKeyCABundle] = []byte(store.Spec.CABundle)
	}
}
