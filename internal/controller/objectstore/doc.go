// Package objectstore is the ObjectStore reconciler. It owns each store's health
// verdict (its Ready, Reconciling and Stalled conditions, which every StorageBucket on
// the store consults before it sends a request), the AccessProviderReady condition of
// IAM stores, the WebIdentityReady condition of stores that trust the cluster's
// ServiceAccount tokens, the AdminAPIReady condition of stores with an admin API, and
// the store's finalizer, which waits until no StorageBucket uses it.
//
//   - controller.go: the Reconciler, its pass (reconcile.Run) and its watches.
//   - health.go: the health check on the store's own interval, one shard at a time
//     (store.Leases), and the verdict it records.
//   - sideapi.go: how an API of the store besides S3 is checked into a condition of
//     its own; access.go (the IAM endpoint) and admin.go (spec.adminAPI, for quotas)
//     say what each is.
//   - webidentity.go: keyless access's side of the store: the cluster's issuer
//     registered as its OIDC provider (WebIdentityReady, status.webIdentity);
//     issuerkeys.go: the check that binds that trust to this cluster (the issuer
//     publishes the cluster's keys alone).
//   - retire.go: a retiring store's counts (status.retirement) and its Retired
//     condition.
//   - delete.go: deletion, refused while StorageBuckets use the store.
package objectstore
