package main

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is the part of krew's Plugin manifest (krew.googlecontainertools.github.com
// v1alpha2) that krew needs to install the plugin.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// TestKrewManifest: plugins/bucketkeeper.yaml, filled in as krew-release-bot fills it
// for a tag, is a krew Plugin whose platforms are exactly the archives
// hack/plugin-dist.sh builds, each selecting its own os and arch and naming the
// binary the archive holds.
func TestKrewManifest(t *testing.T) {
	const tag = "v1.2.3"
	root := filepath.Join("..", "..")
	raw, err := os.ReadFile(filepath.Join(root, "plugins", "bucketkeeper.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The bot's two template actions: the tag, and an archive's uri with its sum.
	text := strings.ReplaceAll(string(raw), "{{ .TagName }}", tag)
	text = regexp.MustCompile(`\{\{addURIAndSha "([^"]+)" \.TagName \}\}`).ReplaceAllString(text,
		"uri: $1\n    sha256: "+strings.Repeat("ab", 32))
	if strings.Contains(text, "{{") {
		t.Fatalf("template actions krew-release-bot does not fill in:\n%s", text)
	}
	var p krewPlugin
	if err := yaml.UnmarshalStrict([]byte(text), &p); err != nil {
		t.Fatalf("the filled-in manifest: %v\n%s", err, text)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "bucketkeeper" ||
		p.Spec.Version != tag || p.Spec.ShortDescription == "" || p.Spec.Homepage == "" {
		t.Errorf("manifest header: %+v", p)
	}

	cmd := exec.Command(filepath.Join(root, "hack", "plugin-dist.sh"), "--list", tag)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/plugin-dist.sh --list: %v", err)
	}
	archives := strings.Fields(string(out))
	var named []string
	for _, pl := range p.Spec.Platforms {
		goos, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		name := path.Base(pl.URI)
		named = append(named, name)
		if want := "kubectl-bucketkeeper_" + tag + "_" + goos + "_" + arch + ".tar.gz"; name != want {
			t.Errorf("platform %s/%s: archive %s, want %s", goos, arch, name, want)
		}
		wantBin := "kubectl-bucketkeeper"
		if goos == "windows" {
			wantBin += ".exe"
		}
		if pl.Bin != wantBin || len(pl.Sha256) != 64 {
			t.Errorf("platform %s/%s: bin %q, sha256 %q; want bin %q", goos, arch, pl.Bin, pl.Sha256, wantBin)
		}
	}
	slices.Sort(named)
	slices.Sort(archives)
	if !slices.Equal(named, archives) {
		t.Errorf("the manifest names archives %v; hack/plugin-dist.sh builds %v", named, archives)
	}
}
