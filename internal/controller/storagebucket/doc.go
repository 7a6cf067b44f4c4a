// Package storagebucket is the StorageBucket reconciler: a claim in a namespace
// becomes a bucket on an S3-compatible store outside the cluster. It owns the bucket
// (created, adopted or bound again, and tagged as this claim's), its configuration
// (versioning, tags, lifecycle, public access, policy, CORS and quota, with drift
// corrected), the connection Secret, the bucket's health probe on its own timer, the
// implicit BucketAccess a claim may ask for, and the deletion policy.
//
// A pass, in the order controller.go runs it:
//   - store.go: where the bucket should live (retire.go: the store the spec names,
//     or its successor where that store retires), the ObjectStore it lives on,
//     whether this namespace may use it and whether it is Ready, and the bucket's
//     name and region;
//   - guardrails.go, lane.go, withdraw.go: the store's guardrails, suspended claims
//     included, and what a tightened guardrail takes back from a bucket;
//   - bucket.go, adoption.go, ownership.go, namelock.go: the bucket itself, by its
//     ownership tags, one claim at a time per name;
//   - sync.go, config.go, applied.go, cors.go, quota.go: whether the configuration is due, and
//     the settings applied with the rule for settings the spec leaves out (the quota
//     through the store's admin API, within the store's quota guardrails);
//   - secret.go, access.go: the connection Secret and the implicit access;
//   - probe.go, probeonly.go: the probe and its scheduler, and the short pass that
//     only probes;
//   - delete.go, purge.go, purge_lock.go, purge_copy.go: deletion per policy, a
//     purge's paced progress, the wait for locked versions (bounded for a claim being
//     deleted), and the one purge every bucket of a claim's goes through: its home, and
//     the copies its moves leave (move_delete.go, move_source.go);
//   - move.go and the move_*.go beside it: moving the bucket to another store (move.go
//     says how), each move queued for a slot of its stores and of the process, with
//     its share of their request budgets (move_queue.go), and a cancelled move's
//     target kept to resume it (move_keep.go); a store's retirement moves it the same
//     way, and reports in StoreRetired (retire.go).
//
// Beside the passes, MoveSweeper (sweep.go, sweep_moves.go, sweep_buckets.go) removes
// what a move whose claim is gone left behind, on the access collector's schedule.
//
// setup.go wires the watches; requester.go turns a webhook's probe request into a
// pass. It imports no other reconciler.
package storagebucket
