package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The OCI media types and annotations the image uses.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
	// annotationRefName is the tag of an image in an OCI layout (skopeo's oci:DIR:TAG).
	annotationRefName = "org.opencontainers.image.ref.name"
	// annotationImageName is the full name containerd gives an image it imports.
	annotationImageName = "io.containerd.image.name"
)

// The manager image: the static binary at /manager, run as user 65532 (the chart's and
// config/manager's securityContext), with the licence and the third-party notices
// beside it. No base image: the binary reads nothing from its root (the public CA
// roots are compiled in, cmd/bucketkeeper/roots.go; the user is numeric).
const (
	imageBinary = "/manager"
	imageUser   = "65532:65532"
)

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        descriptor        `json:"config"`
	Layers        []descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type index struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Manifests     []descriptor      `json:"manifests"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// imageConfig is the part of an OCI image configuration this image sets.
type imageConfig struct {
	Created      string        `json:"created"`
	Architecture string        `json:"architecture"`
	OS           string        `json:"os"`
	Config       containerConf `json:"config"`
	RootFS       struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []history `json:"history"`
}

type containerConf struct {
	User       string            `json:"User"`
	Entrypoint []string          `json:"Entrypoint"`
	WorkingDir string            `json:"WorkingDir"`
	Labels     map[string]string `json:"Labels,omitempty"`
}

type history struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

// imageFile is a file of the image's one layer.
type imageFile struct {
	Path string // absolute, in the image
	Data []byte
	Mode int64
}

// imageSpec is what the image is made of, one platform at a time.
type imageSpec struct {
	Ref     string // repository:tag
	Version string // the tag
	Created time.Time
	// Labels are the image's OCI annotations and config labels (source, version,
	// revision, licences).
	Labels map[string]string
}

// blobStore holds the blobs of an OCI layout, by digest.
type blobStore map[string][]byte

func (s blobStore) put(mediaType string, data []byte) descriptor {
	sum := sha256.Sum256(data)
	d := "sha256:" + hex.EncodeToString(sum[:])
	s[d] = data
	return descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}
}

// buildPlatformImage puts one platform's image (its layer, config and manifest) into
// blobs and returns the manifest's descriptor, with the platform.
func buildPlatformImage(blobs blobStore, spec imageSpec, p platform, files []imageFile) (descriptor, error) {
	layer, diffID, err := layerTar(files, spec.Created)
	if err != nil {
		return descriptor{}, err
	}
	layerDesc := blobs.put(mediaLayer, layer)
	created := spec.Created.UTC().Format(time.RFC3339)
	cfg := imageConfig{Created: created, Architecture: p.Architecture, OS: p.OS, Config: containerConf{
		User: imageUser, Entrypoint: []string{imageBinary}, WorkingDir: "/", Labels: spec.Labels,
	}, History: []history{{Created: created, CreatedBy: "hack/release: the manager, LICENSE and THIRD_PARTY_NOTICES"}}}
	cfg.RootFS.Type, cfg.RootFS.DiffIDs = "layers", []string{diffID}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return descriptor{}, err
	}
	m := manifest{SchemaVersion: 2, MediaType: mediaManifest, Config: blobs.put(mediaConfig, cfgJSON),
		Layers: []descriptor{layerDesc}, Annotations: spec.Labels}
	mJSON, err := json.Marshal(m)
	if err != nil {
		return descriptor{}, err
	}
	d := blobs.put(mediaManifest, mJSON)
	d.Platform = &p
	return d, nil
}

// layerTar returns the gzipped layer holding files, and the digest of the
// uncompressed tar (its diff ID). Every entry is owned by root and dated created,
// and gzip writes no name or time, so the same files make the same layer.
func layerTar(files []imageFile, created time.Time) (gz []byte, diffID string, err error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	dirs := map[string]bool{}
	for _, f := range files {
		for d := filepath.Dir(strings.TrimPrefix(f.Path, "/")); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	// Directories first, parents before children (sorted), then the files as given.
	dirList := make([]string, 0, len(dirs))
	for d := range dirs {
		dirList = append(dirList, d)
	}
	slices.Sort(dirList)
	for _, d := range dirList {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: created,
			Format: tar.FormatUSTAR}); err != nil {
			return nil, "", err
		}
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Path, "/"), Mode: f.Mode,
			Size: int64(len(f.Data)), ModTime: created, Format: tar.FormatUSTAR}); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(raw.Bytes())
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.DefaultCompression)
	if err != nil {
		return nil, "", err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return out.Bytes(), "sha256:" + hex.EncodeToString(sum[:]), nil
}

// refAnnotations name an image in an OCI layout's index.json: the tag (for skopeo and
// the OCI tools) and the full name (for containerd's import).
func refAnnotations(spec imageSpec) map[string]string {
	return map[string]string{annotationRefName: spec.Version, annotationImageName: spec.Ref}
}

// writeLayout writes an OCI image layout directory at dir whose index.json names top,
// holding every blob of blobs that top reaches.
func writeLayout(dir string, blobs blobStore, top descriptor) error {
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		return err
	}
	files, err := layoutFiles(blobs, top)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeArchive writes the same layout as one tar file (an OCI archive, which `ctr
// images import` and skopeo's oci-archive: read), its entries dated created.
func writeArchive(path string, blobs blobStore, top descriptor, created time.Time) error {
	files, err := layoutFiles(blobs, top)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: created, Format: tar.FormatUSTAR}); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)),
			ModTime: created, Format: tar.FormatUSTAR}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

type layoutFile struct {
	name string
	data []byte
}

// layoutFiles are the files of a layout naming top: oci-layout, index.json and the
// blobs top reaches, in a fixed order.
func layoutFiles(blobs blobStore, top descriptor) ([]layoutFile, error) {
	idx, err := json.Marshal(index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []descriptor{top}})
	if err != nil {
		return nil, err
	}
	files := []layoutFile{{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {"index.json", idx}}
	reached, err := reachable(blobs, top)
	if err != nil {
		return nil, err
	}
	for _, d := range reached {
		files = append(files, layoutFile{"blobs/sha256/" + strings.TrimPrefix(d, "sha256:"), blobs[d]})
	}
	return files, nil
}

// reachable returns the digests of d and of every blob it references, sorted.
func reachable(blobs blobStore, d descriptor) ([]string, error) {
	seen := map[string]bool{}
	var walk func(descriptor) error
	walk = func(d descriptor) error {
		data, ok := blobs[d.Digest]
		if !ok {
			return fmt.Errorf("blob %s is missing", d.Digest)
		}
		if seen[d.Digest] {
			return nil
		}
		seen[d.Digest] = true
		switch d.MediaType {
		case mediaIndex:
			var idx index
			if err := json.Unmarshal(data, &idx); err != nil {
				return err
			}
			for _, m := range idx.Manifests {
				if err := walk(m); err != nil {
					return err
				}
			}
		case mediaManifest:
			var m manifest
			if err := json.Unmarshal(data, &m); err != nil {
				return err
			}
			for _, c := range append([]descriptor{m.Config}, m.Layers...) {
				if err := walk(c); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(d); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}
