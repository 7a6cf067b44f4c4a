// Package probe schedules periodic S3 health probes for StorageBuckets.
//
// A naive implementation re-enqueues every bucket from one global ticker,
// which turns N buckets into N simultaneous S3 calls once per interval (a
// thundering herd against the object store and the API server). Instead each
// key gets its own slot on a per-key grid (see Phase/NextSlot) and a
// leader-only Scheduler emits one generic event per key when its slot is due,
// optionally paced by a per-store token bucket. The Scheduler is the one holder of
// each key's due time: the reconcile its event wakes reads whether it fired, and for
// which time, with Lookup.
package probe
