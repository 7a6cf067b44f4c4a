package manifests

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// releaseImage is what the Dockerfile's final stage makes of the manager: where the
// binary sits, the entrypoint and the user.
type releaseImage struct {
	Binary     string   // path of the manager in the image
	Entrypoint []string // the image's ENTRYPOINT
	User       string   // the image's USER, uid:gid
}

// dockerfileImage reads releaseImage from the Dockerfile.
func dockerfileImage(t testing.TB) releaseImage {
	t.Helper()
	df := string(readFile(t, "Dockerfile"))
	final := df[strings.LastIndex(df, "FROM "):]
	var img releaseImage
	if m := regexp.MustCompile(`(?m)^COPY --from=builder \S+ (\S+)$`).FindStringSubmatch(final); m != nil {
		img.Binary = m[1]
	}
	if m := regexp.MustCompile(`(?m)^ENTRYPOINT (\[.*\])$`).FindStringSubmatch(final); m != nil {
		if err := json.Unmarshal([]byte(m[1]), &img.Entrypoint); err != nil {
			t.Fatalf("Dockerfile ENTRYPOINT %s: %v", m[1], err)
		}
	}
	if m := regexp.MustCompile(`(?m)^USER (\S+)$`).FindStringSubmatch(final); m != nil {
		img.User = m[1]
	}
	if img.Binary == "" || len(img.Entrypoint) == 0 || img.User == "" {
		t.Fatalf("the Dockerfile's final stage must COPY the manager, set ENTRYPOINT and USER; read %+v from\n%s", img, final)
	}
	return img
}

// releaseArtifacts are the artifacts of `make release-dry-run` the install test
// installs, as a user downloads them from a release.
type releaseArtifacts struct {
	Version string
	Chart   string // the packaged chart, bucketkeeper-VERSION.tgz
	Bundle  string // the rendered kustomize bundle, bucketkeeper.yaml
	Image   string // the image's OCI archive for this machine's architecture
}

// releaseDist returns the release artifacts in $BUCKETKEEPER_RELEASE_DIST (make test
// runs make release-dry-run before the install suite and names its dist/ so), or runs
// `make release-dry-run` itself and takes its dist/. Each artifact must match
// SHA256SUMS, as a user checks them.
func releaseDist(t *testing.T) releaseArtifacts {
	t.Helper()
	dir := os.Getenv("BUCKETKEEPER_RELEASE_DIST")
	if dir == "" {
		cmd := exec.Command("make", "--no-print-directory", "release-dry-run")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make release-dry-run: %v\n%s", err, out)
		}
		dir = filepath.Join(repoRoot(t), "dist")
	}
	charts, _ := filepath.Glob(filepath.Join(dir, "bucketkeeper-*.tgz"))
	if len(charts) != 1 {
		t.Fatalf("%s holds charts %v, want one: run make release-dry-run", dir, charts)
	}
	c, err := loader.Load(charts[0])
	if err != nil {
		t.Fatal(err)
	}
	a := releaseArtifacts{Version: c.Metadata.Version, Chart: charts[0], Bundle: filepath.Join(dir, "bucketkeeper.yaml"),
		Image: filepath.Join(dir, fmt.Sprintf("bucketkeeper_%s_linux_%s.oci.tar", c.Metadata.Version, runtime.GOARCH))}
	sums := readSums(t, filepath.Join(dir, "SHA256SUMS"))
	for _, path := range []string{a.Chart, a.Bundle, a.Image} {
		want, ok := sums[filepath.Base(path)]
		if !ok {
			t.Fatalf("SHA256SUMS does not list %s", filepath.Base(path))
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != want {
			t.Fatalf("%s does not match SHA256SUMS", path)
		}
	}
	return a
}

// readSums reads a sha256sum file: file name -> hex digest.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sum, name, ok := strings.Cut(sc.Text(), "  "); ok {
			sums[name] = sum
		}
	}
	return sums
}

// ociImage is what an OCI archive of one platform's image says: the name containerd
// gives it on import, its platform and its configuration.
type ociImage struct {
	Name, Platform string
	Entrypoint     []string
	User           string
}

// readOCIArchive reads the one image of an OCI archive.
func readOCIArchive(t *testing.T, path string) ociImage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if name := h.Name; name == "index.json" || strings.HasPrefix(name, "blobs/") && h.Size < 1<<20 {
			files[name], _ = io.ReadAll(tr)
		}
	}
	type desc struct {
		Digest      string
		Annotations map[string]string
	}
	blob := func(d desc, v any) {
		t.Helper()
		if err := json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")], v); err != nil {
			t.Fatalf("%s: blob %s: %v", path, d.Digest, err)
		}
	}
	var idx struct{ Manifests []desc }
	if err := json.Unmarshal(files["index.json"], &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("%s: index.json names %d images (%v), want 1", path, len(idx.Manifests), err)
	}
	var m struct{ Config desc }
	blob(idx.Manifests[0], &m)
	var cfg struct {
		OS, Architecture string
		Config           struct {
			Entrypoint []string
			User       string
		}
	}
	blob(m.Config, &cfg)
	return ociImage{Name: idx.Manifests[0].Annotations["io.containerd.image.name"], Platform: cfg.OS + "/" + cfg.Architecture,
		Entrypoint: cfg.Config.Entrypoint, User: cfg.Config.User}
}

// checkReleaseImage: the release's image for this machine is named as the chart and
// the bundle deploy it, is for this platform, and runs what the Dockerfile's final
// stage runs, as its user.
func checkReleaseImage(t *testing.T, a releaseArtifacts, deployed string) {
	t.Helper()
	img, df := readOCIArchive(t, a.Image), dockerfileImage(t)
	if img.Name != deployed || img.Platform != "linux/"+runtime.GOARCH {
		t.Errorf("%s holds %s for %s; the release deploys %s on linux/%s", a.Image, img.Name, img.Platform, deployed, runtime.GOARCH)
	}
	if !slices.Equal(img.Entrypoint, df.Entrypoint) || img.User != df.User {
		t.Errorf("the release image runs %v as %s; the Dockerfile's, %v as %s", img.Entrypoint, img.User, df.Entrypoint, df.User)
	}
}

// TestImageAgreesWithTheChart: the user the chart's and config/default's
// securityContext demand is the Dockerfile's USER (and distroless nonroot's, ko's
// base, and the release image's: TestInstall reads it from the image).
func TestImageAgreesWithTheChart(t *testing.T) {
	img := dockerfileImage(t)
	if img.Entrypoint[0] != img.Binary {
		t.Errorf("ENTRYPOINT %v does not run the copied binary %s", img.Entrypoint, img.Binary)
	}
	if koUser := "65532:65532"; img.User != koUser { // gcr.io/distroless/static:nonroot, ko's base
		t.Errorf("Dockerfile USER %s, but ko's base image runs as %s", img.User, koUser)
	}
	for source, objs := range map[string][]*unstructured.Unstructured{
		"chart": renderChart(t, nil).Objects, "config/default": renderKustomize(t),
	} {
		d, c := manager(t, objs)
		pod := d.Spec.Template.Spec.SecurityContext
		for where, ids := range map[string][2]*int64{
			"pod":       {pod.RunAsUser, pod.RunAsGroup},
			"container": {c.SecurityContext.RunAsUser, c.SecurityContext.RunAsGroup},
		} {
			if got := fmt.Sprintf("%s:%s", idString(ids[0]), idString(ids[1])); got != img.User {
				t.Errorf("%s: %s securityContext runs as %s, the image's USER is %s", source, where, got, img.User)
			}
		}
	}
}

func idString(id *int64) string {
	if id == nil {
		return "unset"
	}
	return strconv.FormatInt(*id, 10)
}
