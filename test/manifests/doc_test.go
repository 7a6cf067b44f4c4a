// Package manifests tests the deployable artefacts of bucketkeeper: the kustomize
// overlay config/default, the Helm chart charts/bucketkeeper, the image build files,
// and, in TestInstall, the release `make release-dry-run` builds of them, installed on
// a real node. It is its own Go module so that Helm's and kustomize's dependencies
// never enter the operator's module.
//
// Run it from this directory:
//
//	BUCKETKEEPER_PEERS_BIN=$(../../hack/peers/build.sh --dir) go test -count=1 ./...
//
// TestInstall runs `make release-dry-run` first, unless BUCKETKEEPER_RELEASE_DIST names
// a dist/ it wrote (make test's install suite runs it and names its dist/ so).
package manifests
