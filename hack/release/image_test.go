package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// testImage builds a two-platform image of small files, as packageRelease does.
func testImage(t *testing.T) (blobStore, descriptor, []descriptor, imageSpec) {
	t.Helper()
	spec := imageSpec{Ref: "registry.example.com/bk:1.2.3", Version: "1.2.3", Created: time.Unix(1700000000, 0).UTC(),
		Labels: map[string]string{"org.opencontainers.image.version": "1.2.3"}}
	blobs := blobStore{}
	var manifests []descriptor
	for _, arch := range []string{"amd64", "arm64"} {
		d, err := buildPlatformImage(blobs, spec, platform{OS: "linux", Architecture: arch}, []imageFile{
			{Path: imageBinary, Data: []byte("binary for " + arch), Mode: 0o755},
			{Path: "/licenses/LICENSE", Data: []byte("Apache"), Mode: 0o644},
		})
		if err != nil {
			t.Fatal(err)
		}
		manifests = append(manifests, d)
	}
	idx, err := json.Marshal(index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: manifests})
	if err != nil {
		t.Fatal(err)
	}
	top := blobs.put(mediaIndex, idx)
	top.Annotations = refAnnotations(spec)
	return blobs, top, manifests, spec
}

// layoutImage is one platform's image read back from a layout.
type layoutImage struct {
	Config imageConfig
	Files  map[string]tar.Header
	Data   map[string][]byte
}

// readLayout reads an OCI layout from its files by name, checking every blob's digest
// and size against the descriptor that reaches it, and returns the descriptor
// index.json names and the images it holds, by platform.
func readLayout(t *testing.T, files map[string][]byte) (descriptor, map[string]layoutImage) {
	t.Helper()
	if got := string(files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout %q", got)
	}
	var top index
	if err := json.Unmarshal(files["index.json"], &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 {
		t.Fatalf("index.json names %d images, want 1", len(top.Manifests))
	}
	blob := func(d descriptor) []byte {
		t.Helper()
		data, ok := files["blobs/sha256/"+d.Digest[len("sha256:"):]]
		if !ok {
			t.Fatalf("blob %s (%s) is missing", d.Digest, d.MediaType)
		}
		sum := sha256.Sum256(data)
		if "sha256:"+hex.EncodeToString(sum[:]) != d.Digest || int64(len(data)) != d.Size {
			t.Fatalf("blob %s: digest or size does not match its descriptor", d.Digest)
		}
		return data
	}
	images := map[string]layoutImage{}
	readManifest := func(d descriptor) {
		var m manifest
		if err := json.Unmarshal(blob(d), &m); err != nil {
			t.Fatal(err)
		}
		var img layoutImage
		if err := json.Unmarshal(blob(m.Config), &img.Config); err != nil {
			t.Fatal(err)
		}
		if len(m.Layers) != 1 || m.Layers[0].MediaType != mediaLayer {
			t.Fatalf("layers %+v", m.Layers)
		}
		zr, err := gzip.NewReader(bytes.NewReader(blob(m.Layers[0])))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(raw)
		if want := "sha256:" + hex.EncodeToString(sum[:]); !slices.Equal(img.Config.RootFS.DiffIDs, []string{want}) {
			t.Errorf("diff_ids %v, want [%s]", img.Config.RootFS.DiffIDs, want)
		}
		img.Files, img.Data = map[string]tar.Header{}, map[string][]byte{}
		tr := tar.NewReader(bytes.NewReader(raw))
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			img.Files[h.Name] = *h
			img.Data[h.Name], _ = io.ReadAll(tr)
		}
		key := img.Config.OS + "/" + img.Config.Architecture
		if d.Platform == nil || d.Platform.OS+"/"+d.Platform.Architecture != key {
			t.Errorf("manifest of %s has platform %+v", key, d.Platform)
		}
		images[key] = img
	}
	switch d := top.Manifests[0]; d.MediaType {
	case mediaIndex:
		var idx index
		if err := json.Unmarshal(blob(d), &idx); err != nil {
			t.Fatal(err)
		}
		for _, m := range idx.Manifests {
			readManifest(m)
		}
	case mediaManifest:
		readManifest(d)
	default:
		t.Fatalf("index.json names a %s", d.MediaType)
	}
	return top.Manifests[0], images
}

// readTar returns a tar file's regular files by name.
func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			out[h.Name], _ = io.ReadAll(tr)
		}
	}
}

// readDir returns a directory's files by path relative to it.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)], err = os.ReadFile(path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestImageLayoutAndArchives: the multi-platform layout names the image by its tag
// and full name, and each platform's image runs /manager as 65532:65532 from a layer
// holding exactly the files given, root-owned and dated; every blob matches its
// descriptor. A platform's archive holds that platform's image alone, under the same
// names. Built twice from the same files, the image has the same digest.
func TestImageLayoutAndArchives(t *testing.T) {
	blobs, top, manifests, spec := testImage(t)
	dir := t.TempDir()
	if err := writeLayout(filepath.Join(dir, "oci"), blobs, top); err != nil {
		t.Fatal(err)
	}
	named, images := readLayout(t, readDir(t, filepath.Join(dir, "oci")))
	if named.Annotations[annotationRefName] != "1.2.3" || named.Annotations[annotationImageName] != spec.Ref {
		t.Errorf("the layout names the image %v", named.Annotations)
	}
	if len(images) != 2 {
		t.Fatalf("platforms %v, want linux/amd64 and linux/arm64", images)
	}
	for p, img := range images {
		c := img.Config
		if c.Config.User != "65532:65532" || !slices.Equal(c.Config.Entrypoint, []string{"/manager"}) ||
			c.Created != "2023-11-14T22:13:20Z" || c.Config.Labels["org.opencontainers.image.version"] != "1.2.3" {
			t.Errorf("%s config %+v", p, c)
		}
		var names []string
		for name, h := range img.Files {
			names = append(names, name)
			if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(spec.Created) {
				t.Errorf("%s: %s owned by %d:%d, dated %v", p, name, h.Uid, h.Gid, h.ModTime)
			}
		}
		slices.Sort(names)
		if want := []string{"licenses/", "licenses/LICENSE", "manager"}; !slices.Equal(names, want) {
			t.Errorf("%s layer holds %v, want %v", p, names, want)
		}
		if h := img.Files["manager"]; h.Mode != 0o755 || string(img.Data["manager"]) != "binary for "+c.Architecture {
			t.Errorf("%s: /manager mode %o, %q", p, h.Mode, img.Data["manager"])
		}
	}

	one := manifests[1]
	one.Annotations = refAnnotations(spec)
	archive := filepath.Join(dir, "arm64.oci.tar")
	if err := writeArchive(archive, blobs, one, spec.Created); err != nil {
		t.Fatal(err)
	}
	named, images = readLayout(t, readTar(t, archive))
	if _, ok := images["linux/arm64"]; len(images) != 1 || !ok || named.Annotations[annotationImageName] != spec.Ref {
		t.Errorf("the arm64 archive holds %v, named %v", images, named.Annotations)
	}

	_, again, _, _ := testImage(t)
	if again.Digest != top.Digest {
		t.Errorf("the same files made image %s, then %s", top.Digest, again.Digest)
	}
}
