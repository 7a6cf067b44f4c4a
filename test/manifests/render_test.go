package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

const (
	namespace   = "bucketkeeper-system"
	releaseName = "bucketkeeper"
)

// repoRoot is the directory of the operator's go.mod (two levels up).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// renderKustomize builds config/default as `kustomize build` would.
func renderKustomize(t testing.TB) []*unstructured.Unstructured {
	t.Helper()
	return renderKustomizeAt(t, filepath.Join(repoRoot(t), "config", "default"))
}

// renderKustomizeAt builds the kustomization in dir as `kustomize build` would.
func renderKustomizeAt(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return decodeAll(t, dir, out)
}

// renderedChart is the output of the chart's templates plus its crds/ files, which
// Helm installs itself and never templates.
type renderedChart struct {
	Objects []*unstructured.Unstructured
	CRDs    []*unstructured.Unstructured
	Notes   string
}

// renderChart renders charts/bucketkeeper like `helm template bucketkeeper -n
// bucketkeeper-system`, with overrides on top of values.yaml.
func renderChart(t testing.TB, overrides map[string]any) renderedChart {
	t.Helper()
	out, err := renderChartErr(repoRoot(t), overrides)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func renderChartErr(root string, overrides map[string]any) (renderedChart, error) {
	var out renderedChart
	chrt, err := loader.Load(filepath.Join(root, "charts", "bucketkeeper"))
	if err != nil {
		return out, fmt.Errorf("load chart: %w", err)
	}
	vals, err := chartutil.ToRenderValues(chrt, overrides, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true,
	}, nil)
	if err != nil {
		return out, fmt.Errorf("chart values: %w", err)
	}
	files, err := engine.Render(chrt, vals)
	if err != nil {
		return out, fmt.Errorf("render chart: %w", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			out.Notes = files[name]
			continue
		}
		objs, err := decode(name, []byte(files[name]))
		if err != nil {
			return out, err
		}
		out.Objects = append(out.Objects, objs...)
	}
	for _, f := range chrt.CRDObjects() {
		objs, err := decode(f.Filename, f.File.Data)
		if err != nil {
			return out, err
		}
		out.CRDs = append(out.CRDs, objs...)
	}
	return out, nil
}

func decodeAll(t testing.TB, source string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := decode(source, data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// decode splits a multi-document YAML stream into objects, skipping empty documents.
func decode(source string, data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("%s: a document without kind or name: %v", source, m)
		}
		objs = append(objs, u)
	}
}

// find returns the only object of kind, failing the test if there is not exactly one.
func find(t testing.TB, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	found := findAll(objs, kind)
	if len(found) != 1 {
		t.Fatalf("want exactly one %s, got %d", kind, len(found))
	}
	return found[0]
}

func findAll(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// into converts an object to its typed form.
func into[T any](t testing.TB, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// managerBinary builds cmd/bucketkeeper in the operator's own module (so its
// dependency versions, not this module's, are used) once per test binary.
func managerBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "bucketkeeper-manifests-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "bucketkeeper")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/bucketkeeper")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/bucketkeeper: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
