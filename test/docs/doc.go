// Package docs keeps README.md, DEVELOPMENT.md and docs/ true: its tests fail when a
// relative link or #anchor leads nowhere (links_test.go), when a YAML sample no longer
// passes the real API server's validation (samples_test.go), when a measured figure is
// written outside a generated block or a generated block differs from what its generator
// writes from bench/results (figures_test.go, bench.go), and when a condition reason of
// the API is missing from docs/concepts.md (reasons_test.go).
//
// The measured figures of docs/performance.md are generated: `make docs` writes them
// (BUCKETKEEPER_UPDATE_DOCS=1), from the files `make bench` wrote into bench/results.
package docs
