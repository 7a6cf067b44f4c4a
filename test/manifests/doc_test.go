// Package manifests tests the deployable artefacts of bucketkeeper: the kustomize
// overlay config/default, the Helm chart charts/bucketkeeper, and the image build
// files. It is its own Go module so that Helm's and kustomize's dependencies never
// enter the operator's module.
//
// Run it from this directory:
//
//	BUCKETKEEPER_PEERS_BIN=$(../../hack/peers/build.sh --dir) go test -count=1 ./...
package manifests
