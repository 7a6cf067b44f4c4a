// Package remedy says, for every condition and event reason of the API, what it means
// and what to do about it, in a person's words: whether anyone must act, who (the
// application team or the platform team), and, for a refusal of the platform team's
// guardrails, which ObjectStore setting refused.
//
// It is one table so that what `kubectl bucketkeeper why` prints and what the docs say
// cannot drift apart: the table of reasons in docs/kubectl-plugin.md is generated from
// it (Markdown; TestReasonsDoc fails when the committed block differs, make reasons-doc
// writes it), and TestEveryReasonHasARemedy reads api/v1alpha1/conditions.go with go/ast
// and fails for a reason constant the table lacks. The package imports only the API
// package, so the operator and the plugin both take it without the other's
// dependencies.
package remedy
