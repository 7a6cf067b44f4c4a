package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// renderBundle renders config/default into one YAML stream, the bundle `kubectl apply
// -f` installs, deploying image (repository:tag or repository@digest): what a user who
// runs `kustomize edit set image NAME=IMAGE` in config/default and then `kustomize build
// config/default` gets. It edits a copy of config/ in memory, never the tree. NAME is
// the image config/manager names, the entry config/default's images: holds.
func renderBundle(root, image string) ([]byte, []*unstructured.Unstructured, error) {
	mem := filesys.MakeFsInMemory()
	config := filepath.Join(root, "config")
	err := filepath.WalkDir(config, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		return mem.WriteFile("/"+rel, data)
	})
	if err != nil {
		return nil, nil, err
	}
	if err := setKustomizeImage(mem, "/config/default/kustomization.yaml", image); err != nil {
		return nil, nil, err
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/config/default")
	if err != nil {
		return nil, nil, fmt.Errorf("kustomize build config/default: %w", err)
	}
	out, err := res.AsYaml()
	if err != nil {
		return nil, nil, err
	}
	objs, err := decodeYAML("config/default", out)
	return out, objs, err
}

// setKustomizeImage does what `kustomize edit set image NAME=IMAGE` does to a
// kustomization whose images: has one entry: that entry now maps its name to image.
func setKustomizeImage(fsys filesys.FileSystem, path, image string) error {
	data, err := fsys.ReadFile(path)
	if err != nil {
		return err
	}
	var k types.Kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(k.Images) != 1 {
		return fmt.Errorf("%s: want one images: entry (the manager's), got %d", path, len(k.Images))
	}
	repo, tag, digest := splitImage(image)
	k.Images[0].NewName, k.Images[0].NewTag, k.Images[0].Digest = repo, tag, digest
	out, err := yaml.Marshal(&k)
	if err != nil {
		return err
	}
	return fsys.WriteFile(path, out)
}
