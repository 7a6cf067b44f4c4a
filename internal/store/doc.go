// Package store holds what the reconcilers share per ObjectStore, so that every
// bucket and access on one store draws on one of each:
//
//   - registry.go: Registry, one S3 client per store and signing region, rebuilt when
//     the store's spec or credentials change, carrying the store's request budget; the
//     data of the Secrets stores name, read past the cache; Error, a store problem
//     that retrying will not fix.
//   - slots.go: SlotLimited, the cap on a store's StorageBucket reconciles in flight,
//     so that a hung store cannot take every worker.
//   - lease.go: Leases, the per-store Lease that elects the one shard that
//     health-checks a store.
//   - endpoint.go: what an application needs to reach a store the way the
//     operator does (its endpoint per region, CA bundle, addressing style).
//   - accessproviders.go: AccessProviders, one IAM driver per store whose access
//     provider is IAM, and which provider a store has.
//
// It knows ObjectStores, never the reconcilers: they import it, not the other way.
package store
