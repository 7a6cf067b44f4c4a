// Package s3 is the operator's only door to an S3-compatible object store.
//
// The controllers never see the AWS SDK: they get a small [Client] interface
// that speaks in plain Go types ([LifecycleRule], [PublicAccessBlock],
// map[string]string tags, ...), and a [Factory] that builds one from a
// [Config]. The shape follows crossplane-runtime's ExternalClient idea: the
// reconciler owns the desired-vs-observed logic, and this package owns the
// wire protocol, so tests can swap in a fake Client and the SDK can be
// upgraded in one place.
//
// Three things matter more here than in a general-purpose S3 wrapper:
//
//   - Errors are classified into a [Kind] ([KindOf]), because
//     the stores we target (AWS, SeaweedFS, Versity S3 Gateway, Ceph RGW,
//     MinIO) disagree on codes and statuses for the same condition, and the
//     controller must decide between "requeue with backoff", "report a
//     condition and stop" and "carry on" from one value. The contract tests
//     in this package pin what each real server answers.
//   - Every request is paced by a per-store token bucket and reported to an
//     [Config.Observer], so a controller cannot hammer a small store and
//     tests can count reads and writes ([IsMutating]).
//   - Credentials never leave the SDK's signer: they are not logged and any
//     accidental echo of a secret in a server message is redacted before it
//     reaches an error string.
package s3
