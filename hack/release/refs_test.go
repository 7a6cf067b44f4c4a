package main

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// deployment is a manager Deployment running image with --mover-image=mover.
func deployment(image, mover string) *unstructured.Unstructured {
	c := map[string]any{"name": "manager", "image": image, "args": []any{"--leader-elect=true"}}
	if mover != "" {
		c["args"] = append(c["args"].([]any), "--mover-image="+mover)
	}
	return &unstructured.Unstructured{Object: map[string]any{"kind": "Deployment", "metadata": map[string]any{"name": "m"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{c}}}}}}
}

// TestOnlyImage: the check the packaged chart and the bundle pass refuses a manager
// whose movers run another image, or none, a second container of another image, and
// an image that is not the release's.
func TestOnlyImage(t *testing.T) {
	const want = "ghcr.io/bucketkeeper/bucketkeeper:0.1.0"
	sidecar := deployment(want, want)
	containers := sidecar.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	containers["initContainers"] = []any{map[string]any{"name": "init", "image": "busybox:1"}}
	for name, c := range map[string]struct {
		objs    []*unstructured.Unstructured
		wantErr string
	}{
		"the release's image, twice":    {[]*unstructured.Unstructured{deployment(want, want)}, ""},
		"movers of another image":       {[]*unstructured.Unstructured{deployment(want, "bucketkeeper:dev")}, "bucketkeeper:dev at Deployment/m"},
		"no --mover-image":              {[]*unstructured.Unstructured{deployment(want, "")}, "passes no --mover-image"},
		"another image for the manager": {[]*unstructured.Unstructured{deployment("ghcr.io/bucketkeeper/bucketkeeper:0.0.9", want)}, "0.0.9"},
		"an init container of another":  {[]*unstructured.Unstructured{sidecar}, "busybox:1 at Deployment/m.spec.template.spec.initContainers[0].image"},
	} {
		t.Run(name, func(t *testing.T) {
			err := onlyImage("test", c.objs, want)
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Errorf("onlyImage: %v, want %q", err, c.wantErr)
			}
		})
	}
}

func TestSplitImage(t *testing.T) {
	for in, want := range map[string][3]string{
		"ghcr.io/bucketkeeper/bucketkeeper:0.1.0":  {"ghcr.io/bucketkeeper/bucketkeeper", "0.1.0", ""},
		"registry:5000/bk":                         {"registry:5000/bk", "", ""},
		"registry:5000/bk:1.2.3":                   {"registry:5000/bk", "1.2.3", ""},
		"registry.example.com/bk@sha256:abc":       {"registry.example.com/bk", "", "sha256:abc"},
		"registry.example.com/bk:1.2.3@sha256:abc": {"registry.example.com/bk", "1.2.3", "sha256:abc"},
	} {
		repo, tag, digest := splitImage(in)
		if got := [3]string{repo, tag, digest}; got != want {
			t.Errorf("splitImage(%q) = %q, want %q", in, got, want)
		}
	}
}
