package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestReleaseWorkflow: the release workflow runs on a v* tag, builds with the target
// make test runs (release-dry-run, given the tag), pushes to the repository the
// Makefile and the chart name, and publishes the artifacts under the names
// `release package` gives them; it may write the release and the packages and get an
// OIDC token for keyless signing, and nothing else.
func TestReleaseWorkflow(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "release.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		// YAML 1.1 reads the key on as true, and so does sigs.k8s.io/yaml.
		On struct {
			Push struct{ Tags []string }
		} `json:"true"`
		Permissions map[string]string
		Jobs        map[string]struct {
			Permissions map[string]string
			Env         map[string]string
			Steps       []struct{ Name, Uses, Run string }
		}
	}
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(wf.On.Push.Tags, []string{"v*"}) {
		t.Errorf("on.push.tags %v, want [v*]", wf.On.Push.Tags)
	}
	if len(wf.Permissions) != 0 {
		t.Errorf("workflow-wide permissions %v, want none", wf.Permissions)
	}
	job, ok := wf.Jobs["release"]
	if !ok {
		t.Fatal("no job release")
	}
	wantPerms := map[string]string{"contents": "write", "packages": "write", "id-token": "write"}
	if len(job.Permissions) != len(wantPerms) {
		t.Errorf("permissions %v, want %v", job.Permissions, wantPerms)
	}
	for k, v := range wantPerms {
		if job.Permissions[k] != v {
			t.Errorf("permissions %v, want %v", job.Permissions, wantPerms)
		}
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^RELEASE_IMAGE := (\S+)$`).FindSubmatch(makefile); m == nil || job.Env["IMAGE"] != string(m[1]) {
		t.Errorf("the workflow pushes %s; the Makefile's RELEASE_IMAGE is %s", job.Env["IMAGE"], m)
	}
	var run []string
	for _, s := range job.Steps {
		run = append(run, s.Run)
	}
	script := strings.Join(run, "\n")
	// The names `release package` writes, as the workflow's shell spells the version.
	r := release{Version: "${TAG#v}", Tag: "$TAG"}
	for _, want := range []string{
		`make release-dry-run RELEASE_TAG="$TAG"`,
		"release-notes RELEASE_TAG=\"$TAG\"",
		"dist/" + r.layoutDir() + "/index.json",
		`"oci:dist/` + r.layoutDir() + `:$version"`,
		"--preserve-digests",
		`cosign sign --yes "$IMAGE@$IMAGE_DIGEST"`,
		"dist/" + r.operatorSBOM(),
		"dist/" + r.chartArchive(),
		"dist/" + sumsFile,
		"gh release create",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("the workflow's steps never run %q", want)
		}
	}
}
