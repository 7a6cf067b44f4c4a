package manifests

import (
	"testing"

	_ "github.com/bucketkeeper/bucketkeeper/test/testenv"
	_ "helm.sh/helm/v3/pkg/chart/loader"
	_ "helm.sh/helm/v3/pkg/chartutil"
	_ "helm.sh/helm/v3/pkg/engine"
	_ "sigs.k8s.io/kustomize/api/krusty"
	_ "sigs.k8s.io/kustomize/kyaml/filesys"
)

func TestX(t *testing.T) {}
