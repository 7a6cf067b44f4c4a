package testenv

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
)

// PauseImage is the test node's sandbox image (containerd's sandbox_image), built from
// ./test/testenv/pause.
const PauseImage = "docker.io/library/bucketkeeper-pause:test"

// ImageConfig is what an image tells the runtime about its process.
type ImageConfig struct {
	Entrypoint []string
	User       string // "uid:gid"
	Env        []string
}

// ImageFile is one file of an image's single layer.
type ImageFile struct {
	Path   string // absolute, in the image
	Source string // the file on this machine
	Mode   int64
}

// WriteImageArchive writes a one-layer image named ref (fully qualified, as containerd
// names it: docker.io/library/NAME:TAG) as a docker-archive tarball, the format
// `docker save` writes and `ctr images import` reads. The image is for this machine's
// platform, which containerd needs to know to keep it.
func WriteImageArchive(path, ref string, cfg ImageConfig, files ...ImageFile) error {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, f := range files {
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(f.Path, "/"), Mode: f.Mode, Size: int64(len(data)),
			Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerSum := sha256.Sum256(layer.Bytes())
	layerID := hex.EncodeToString(layerSum[:])
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Entrypoint": cfg.Entrypoint, "User": cfg.User, "Env": cfg.Env, "WorkingDir": "/"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerID}},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{
		"Config": configName, "RepoTags": []string{ref}, "Layers": []string{layerID + "/layer.tar"},
	}})
	if err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	aw := tar.NewWriter(out)
	for _, e := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerID + "/layer.tar", layer.Bytes()}, {"manifest.json", manifest}} {
		if err := aw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			out.Close()
			return err
		}
		if _, err := aw.Write(e.data); err != nil {
			out.Close()
			return err
		}
	}
	if err := aw.Close(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// archiveRefs returns the image names an archive holds: the RepoTags of a
// docker-archive's manifest.json, or the names an OCI archive's index.json gives its
// images (io.containerd.image.name, the full name containerd imports them under).
func archiveRefs(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("testenv: %s has neither manifest.json nor index.json", path)
		}
		if err != nil {
			return nil, err
		}
		var refs []string
		switch h.Name {
		case "manifest.json":
			var manifest []struct{ RepoTags []string }
			if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
				return nil, err
			}
			for _, m := range manifest {
				refs = append(refs, m.RepoTags...)
			}
		case "index.json":
			var index struct {
				Manifests []struct{ Annotations map[string]string }
			}
			if err := json.NewDecoder(tr).Decode(&index); err != nil {
				return nil, err
			}
			for _, m := range index.Manifests {
				if name := m.Annotations["io.containerd.image.name"]; name != "" {
					refs = append(refs, name)
				}
			}
		default:
			continue
		}
		if len(refs) == 0 {
			return nil, fmt.Errorf("testenv: %s names no image", path)
		}
		return refs, nil
	}
}
