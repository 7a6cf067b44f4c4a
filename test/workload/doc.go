// Package workload is an application's traffic against a bucket, for the tests that
// prove an operation on the bucket (a move between stores) loses nothing: a writer
// that retries every request until the store acknowledges it, and the log of what was
// acknowledged that a test checks the store against afterwards.
package workload
