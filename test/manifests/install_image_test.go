package manifests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// managerImage is the name the chart and config/default give the manager's image at
// this commit: repository bucketkeeper, tag the chart's appVersion ("dev").
const managerImage = "docker.io/library/bucketkeeper:dev"

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

// buildManagerImage builds the manager as the Dockerfile does (static: CGO_ENABLED=0,
// stripped) and writes it into an image laid out as the Dockerfile's: the binary at
// the same path, the same entrypoint and user. Unlike the Dockerfile it does not pass
// -trimpath, which would compile every package again only to change the file names in
// stack traces. The image has no distroless base: the manager reads nothing from it
// (no CA bundle: the test store speaks HTTP; no passwd: the user is numeric).
func buildManagerImage(t *testing.T, dir string) string {
	t.Helper()
	img := dockerfileImage(t)
	bin := filepath.Join(dir, "manager")
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, mainPkg)
	cmd.Dir, cmd.Env = repoRoot(t), append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", mainPkg, err, out)
	}
	tarball := filepath.Join(dir, "manager.tar")
	if err := testenv.WriteImageArchive(tarball, managerImage,
		testenv.ImageConfig{Entrypoint: img.Entrypoint, User: img.User},
		testenv.ImageFile{Path: img.Binary, Source: bin, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	return tarball
}

// TestImageAgreesWithTheChart: the user the chart's securityContext demands is the
// Dockerfile's USER (and distroless nonroot's, ko's base), and the image the chart and
// config/default deploy is the one the install test imports.
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
		if got := "docker.io/library/" + c.Image; got != managerImage {
			t.Errorf("%s deploys image %s, which containerd names %s; the install test imports %s", source, c.Image, got, managerImage)
		}
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
