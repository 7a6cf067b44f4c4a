package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// packageChart packages the chart at dir into out as `helm package --version V
// --app-version V` does (Helm's own chartutil.Save: out/NAME-V.tgz): the chart's
// version and appVersion are the release's version, so the image tag it deploys by
// default is the release's image. The chart must already name repo as its image
// repository: the release pushes there.
func packageChart(dir, version, repo, out string) (string, error) {
	c, err := loader.Load(dir)
	if err != nil {
		return "", fmt.Errorf("load %s: %w", dir, err)
	}
	if got := chartImageRepository(c); got != repo {
		return "", fmt.Errorf("%s/values.yaml: image.repository is %q, but the release pushes %s", dir, got, repo)
	}
	c.Metadata.Version, c.Metadata.AppVersion = version, version
	path, err := chartutil.Save(c, out)
	if err != nil {
		return "", fmt.Errorf("package %s: %w", dir, err)
	}
	return path, nil
}

func chartImageRepository(c *chart.Chart) string {
	img, _ := c.Values["image"].(map[string]any)
	repo, _ := img["repository"].(string)
	return repo
}

// renderChart renders a chart (a directory or a packaged .tgz) as `helm template
// bucketkeeper -n bucketkeeper-system` does, with overrides on top of its values, and
// returns the objects of its templates and its crds/.
func renderChart(path string, overrides map[string]any) (*chart.Chart, []*unstructured.Unstructured, error) {
	c, err := loader.Load(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load %s: %w", path, err)
	}
	vals, err := chartutil.ToRenderValues(c, overrides, chartutil.ReleaseOptions{
		Name: "bucketkeeper", Namespace: "bucketkeeper-system", Revision: 1, IsInstall: true,
	}, nil)
	if err != nil {
		return nil, nil, err
	}
	files, err := engine.Render(c, vals)
	if err != nil {
		return nil, nil, fmt.Errorf("render %s: %w", path, err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if !strings.HasSuffix(name, "NOTES.txt") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		o, err := decodeYAML(name, []byte(files[name]))
		if err != nil {
			return nil, nil, err
		}
		objs = append(objs, o...)
	}
	for _, f := range c.CRDObjects() {
		o, err := decodeYAML(filepath.Join(path, f.Filename), f.File.Data)
		if err != nil {
			return nil, nil, err
		}
		objs = append(objs, o...)
	}
	return c, objs, nil
}

// decodeYAML splits a multi-document YAML stream into objects, skipping empty ones.
func decodeYAML(source string, data []byte) ([]*unstructured.Unstructured, error) {
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
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}
