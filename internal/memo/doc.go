// Package memo is what a controller remembers in memory between passes, per object:
// a map safe for concurrent use whose zero value is ready, with an Update that reads
// and writes one key under one lock.
//
// Why one type: the reconcilers keep a dozen such memories (when a bucket was last
// synced, what its last full pass saw, a purge's progress, a probe's state, when a
// store was last checked), and each written by hand as a mutex and a map repeats the
// same locking, lazy allocation and delete-when-done; here it is written and tested
// once, and each memory keeps only what it means.
package memo
