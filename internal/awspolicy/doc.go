// Package awspolicy is the one list of the AWS actions the operator and the mover
// need, and the IAM policy docs/access.md gives for the operator's identity on AWS,
// rendered from it.
//
// Files:
//   - actions.go: the list (Statements): each statement's Sid and resource, each
//     action with the client operations (the SDK's operation names) that need it, and
//     when (Condition: a version named, tags or a lock carried, a governance bypass).
//   - render.go: Document renders the policy; DocsBegin and DocsEnd mark it in
//     docs/access.md, which TestPolicyDoc holds to it (make docs writes it).
//   - check.go: Missing says which need of a request no action of the list meets.
//   - record.go: Recorder, a middleware for an AWS SDK client (s3.Config.APIOptions,
//     iam.Config.APIOptions) that records each request's service, operation and
//     conditions, so that tests hold every request the clients really send against
//     the list: a call added without its action fails them by name.
//
// The operator sends no STS request: the sessions of keyless access are asked for by
// the applications (AssumeRoleWithWebIdentity), and what admits them is each role's
// trust policy, not the operator's identity. A request of a service the list has no
// action of is missing its action like any other.
//
// The package imports neither internal/s3 nor internal/iam, whose tests use it.
package awspolicy
