// Package docs keeps README.md, DEVELOPMENT.md and docs/ true: its tests fail when a
// relative link or #anchor leads nowhere (links_test.go), when a YAML sample no longer
// passes the real API server's validation (samples_test.go), when a measured figure is
// written outside a generated block or a generated block differs from what its generator
// writes (figures_test.go, bench.go, metrics_test.go), when a condition reason of the
// API is missing from docs/concepts.md (reasons_test.go), when a page's versions,
// recipes or tour are not the tested ones (versions_test.go, recipe_test.go), and when
// DEVELOPMENT.md names a test that does not exist or a user page names a Go test
// (cited_test.go): user pages say what is guaranteed, DEVELOPMENT.md which tests hold it.
//
// The measured figures of docs/performance.md and its table of metrics are generated:
// `make docs` writes them (BUCKETKEEPER_UPDATE_DOCS=1), from the files `make bench`
// wrote into bench/results and from what the operator registers.
package docs
