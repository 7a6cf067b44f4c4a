package manifests

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// releasedRepository is where the release workflow pushes the manager's image.
const releasedRepository = "ghcr.io/bucketkeeper/bucketkeeper"

// chartAppVersion is the chart's appVersion: the released image's tag by default.
func chartAppVersion(t testing.TB) string {
	t.Helper()
	c, err := loader.Load(filepath.Join(repoRoot(t), "charts", "bucketkeeper"))
	if err != nil {
		t.Fatal(err)
	}
	return c.Metadata.AppVersion
}

// imageFlag is a flag whose value is an image (the manager's --mover-image).
var imageFlag = regexp.MustCompile(`^--[a-z-]*image=(.*)$`)

// imageRefs returns every image reference in objs with where it is: each field named
// image, at any depth, and each --*image= argument. Any other string that names the
// image's repository counts too, so that no copy of the image hides in an
// environment variable, annotation or ConfigMap.
func imageRefs(objs []*unstructured.Unstructured, repo string) map[string][]string {
	refs := map[string][]string{}
	name := filepath.Base(repo) + ":"
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "image" {
					refs[s] = append(refs[s], at+".image")
					continue
				}
				walk(x, at+"."+k)
			}
		case []any:
			for i, x := range v {
				walk(x, fmt.Sprintf("%s[%d]", at, i))
			}
		case string:
			if m := imageFlag.FindStringSubmatch(v); m != nil {
				refs[m[1]] = append(refs[m[1]], at)
			} else if strings.Contains(v, name) || strings.Contains(v, repo) {
				refs[v] = append(refs[v], at)
			}
		}
	}
	for _, o := range objs {
		walk(o.Object, o.GetKind()+"/"+o.GetName())
	}
	return refs
}

// checkOnlyImage fails the test unless objs run want as the manager's container and
// pass it as --mover-image, and reference no other image.
func checkOnlyImage(t *testing.T, objs []*unstructured.Unstructured, want string) {
	t.Helper()
	repo, _, _ := strings.Cut(want, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	refs := imageRefs(objs, repo)
	for ref, at := range refs {
		if ref != want {
			t.Errorf("%s at %s; want only %s", ref, strings.Join(at, ", "), want)
		}
	}
	_, c := manager(t, objs)
	if c.Image != want {
		t.Errorf("the manager runs %s, want %s", c.Image, want)
	}
	if got := parseArgs(t, c.Args)["mover-image"]; got != want {
		t.Errorf("--mover-image=%s, want %s (the movers run the manager's image)", got, want)
	}
}

// TestOneImageEverywhere: the chart and config/default deploy the released image
// (ghcr.io/bucketkeeper/bucketkeeper at the chart's appVersion) for the manager and
// its mover Jobs alike, and reference no other image; changing the image the way the
// docs say (helm's image.repository, image.tag or image.digest; `kustomize edit set
// image` in config/default) changes both, so no move waits on an image that is not
// there. An image.digest that is no sha256 digest is refused, not rendered.
func TestOneImageEverywhere(t *testing.T) {
	released := releasedRepository + ":" + chartAppVersion(t)
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for name, c := range map[string]struct {
		values map[string]any
		want   string
	}{
		"defaults":           {nil, released},
		"every value set":    {fullValues(), "registry.example.com/bk:1.2.3"},
		"image.tag":          {map[string]any{"image": map[string]any{"tag": "1.2.3"}}, releasedRepository + ":1.2.3"},
		"image.repository":   {map[string]any{"image": map[string]any{"repository": "registry.example.com/mirror/bk"}}, "registry.example.com/mirror/bk:" + chartAppVersion(t)},
		"repository and tag": {map[string]any{"image": map[string]any{"repository": "registry.example.com/bk", "tag": "9.9.9"}}, "registry.example.com/bk:9.9.9"},
		"image.digest":       {map[string]any{"image": map[string]any{"digest": digest}}, releasedRepository + "@" + digest},
	} {
		t.Run("helm/"+name, func(t *testing.T) {
			out := renderChart(t, c.values)
			checkOnlyImage(t, out.Objects, c.want)
		})
	}
	for _, bad := range []string{"latest", "sha256:0123", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"} {
		if _, err := renderChartErr(repoRoot(t), map[string]any{"image": map[string]any{"digest": bad}}); err == nil ||
			!strings.Contains(err.Error(), "is not a digest") {
			t.Errorf("image.digest %q: render error %v, want one saying it is not a digest", bad, err)
		}
	}
	for name, set := range map[string]string{
		"defaults":          "",
		"set image, tag":    "registry.example.com/mirror/bk:1.2.3",
		"set image, digest": "registry.example.com/mirror/bk@" + digest,
		"set tag only":      releasedRepository + ":1.2.3",
	} {
		t.Run("kustomize/"+name, func(t *testing.T) {
			dir := copyConfig(t)
			want := released
			if set != "" {
				editSetImage(t, filepath.Join(dir, "config", "default"), set)
				want = set
			}
			checkOnlyImage(t, renderKustomizeAt(t, filepath.Join(dir, "config", "default")), want)
		})
	}
}

// copyConfig copies config/ into a temporary directory and returns that directory.
func copyConfig(t *testing.T) string {
	t.Helper()
	root, dir := repoRoot(t), t.TempDir()
	err := filepath.WalkDir(filepath.Join(root, "config"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// editSetImage does to the kustomization in dir what `kustomize edit set image
// NAME=image` does, NAME being its images: entry (the manager's image, as
// docs/install.md says): that entry now maps NAME to image.
func editSetImage(t *testing.T, dir, image string) {
	t.Helper()
	path := filepath.Join(dir, "kustomization.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var k types.Kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatal(err)
	}
	if len(k.Images) != 1 {
		t.Fatalf("%s: want the one images: entry of the manager's image, got %v", path, k.Images)
	}
	repo, digest, _ := strings.Cut(image, "@")
	tag := ""
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo, tag = repo[:i], repo[i+1:]
	}
	k.Images[0].NewName, k.Images[0].NewTag, k.Images[0].Digest = repo, tag, digest
	if out, err := yaml.Marshal(&k); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestKustomizeReplacementsRunAfterImages: config/default copies the manager's image
// into --mover-image with a replacement, which is right only because kustomize runs a
// kustomization's replacements after its images: transformer. That order is
// kustomize's (api/internal/target, configureBuiltinTransformers), not a documented
// promise: this renders a kustomization that would tell, so that an upgrade of
// kustomize that reorders them fails here rather than in users' moves.
func TestKustomizeReplacementsRunAfterImages(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pod.yaml", `apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - {name: c, image: "a:1", args: ["--x-image=a:1"]}
`)
	write("kustomization.yaml", `resources: [pod.yaml]
images:
- {name: a, newName: b, newTag: "2"}
replacements:
- source:
    kind: Pod
    name: p
    fieldPath: spec.containers.[name=c].image
  targets:
  - select:
      kind: Pod
      name: p
    fieldPaths:
    - spec.containers.[name=c].args.[=--x-image=]
    options:
      delimiter: "="
      index: 1
`)
	objs := renderKustomizeAt(t, dir)
	args, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "containers")
	c := args[0].(map[string]any)
	if got := fmt.Sprint(c["image"], " ", c["args"]); got != "b:2 [--x-image=b:2]" {
		t.Errorf("image and arg %s, want b:2 [--x-image=b:2]: kustomize no longer runs replacements after images", got)
	}
}
