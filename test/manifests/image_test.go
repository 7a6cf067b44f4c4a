package manifests

import (
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	distroless = "gcr.io/distroless/static:nonroot"
	mainPkg    = "./cmd/bucketkeeper"
)

// moduleDirs returns the top-level directories of the operator's own packages that
// the manager binary is built from (api, cmd, internal, ...).
func moduleDirs(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", mainPkg)
	root := repoRoot(t)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", mainPkg, err)
	}
	var dirs []string
	for _, line := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(line, root), "/")
		top, _, _ := strings.Cut(rel, "/")
		if !slices.Contains(dirs, top) {
			dirs = append(dirs, top)
		}
	}
	return dirs
}

// TestDockerfile: the builder's Go matches go.mod, the build is static and trimmed,
// the final image is distroless nonroot with only the manager, the kubectl plugin has a
// stage of its own beside it, and every directory the binary is built from is copied
// in and not excluded by .dockerignore.
func TestDockerfile(t *testing.T) {
	df := string(readFile(t, "Dockerfile"))
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(readFile(t, "go.mod")))
	if goVersion == nil {
		t.Fatal("no go directive in go.mod")
	}
	froms := regexp.MustCompile(`(?m)^FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?`).FindAllStringSubmatch(df, -1)
	var stages []string
	for _, f := range froms {
		stages = append(stages, f[1]+" AS "+f[2])
	}
	// The builder, the kubectl plugin's build from it and its export stage, then the
	// image, which a plain docker build stops at.
	want := []string{"golang:" + goVersion[1] + " AS builder", "builder AS plugin-builder", "scratch AS plugin", distroless + " AS "}
	if !slices.Equal(stages, want) {
		t.Fatalf("stages %q, want %q (go.mod says go %s)", stages, want, goVersion[1])
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "go build", mainPkg, `ENTRYPOINT ["/manager"]`, "USER 65532:65532",
		"cd cmd/kubectl-bucketkeeper && go mod download", "-o /out/kubectl-bucketkeeper .", "COPY --from=plugin-builder /out/kubectl-bucketkeeper /kubectl-bucketkeeper"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	final := df[strings.LastIndex(df, "FROM "):]
	if copies := regexp.MustCompile(`(?m)^COPY `).FindAllString(final, -1); len(copies) != 1 ||
		!strings.Contains(final, "COPY --from=builder /out/manager /manager") {
		t.Errorf("the final stage must copy only the manager binary:\n%s", final)
	}
	ignore := strings.Fields(string(readFile(t, ".dockerignore")))
	for _, dir := range moduleDirs(t) {
		if !strings.Contains(df, "COPY "+dir+"/ "+dir+"/") {
			t.Errorf("the manager is built from %s/, which the Dockerfile does not copy", dir)
		}
		if !slices.Contains(ignore, "!"+dir+"/") {
			t.Errorf("the manager is built from %s/, which .dockerignore keeps out of the context", dir)
		}
	}
}

// TestKoConfig: .ko.yaml builds the same binary the same way on the same base.
func TestKoConfig(t *testing.T) {
	var ko struct {
		DefaultBaseImage string   `json:"defaultBaseImage"`
		DefaultPlatforms []string `json:"defaultPlatforms"`
		Builds           []struct {
			ID      string   `json:"id"`
			Dir     string   `json:"dir"`
			Main    string   `json:"main"`
			Env     []string `json:"env"`
			Flags   []string `json:"flags"`
			Ldflags []string `json:"ldflags"`
		} `json:"builds"`
	}
	if err := yaml.UnmarshalStrict(readFile(t, ".ko.yaml"), &ko); err != nil {
		t.Fatalf(".ko.yaml: %v", err)
	}
	if ko.DefaultBaseImage != distroless {
		t.Errorf("defaultBaseImage %q, want %q", ko.DefaultBaseImage, distroless)
	}
	if len(ko.Builds) != 1 {
		t.Fatalf("want one build, got %d", len(ko.Builds))
	}
	b := ko.Builds[0]
	if b.Main != mainPkg || !slices.Contains(b.Env, "CGO_ENABLED=0") || !slices.Contains(b.Flags, "-trimpath") {
		t.Errorf("build %+v: want main %s, CGO_ENABLED=0 and -trimpath", b, mainPkg)
	}
}
