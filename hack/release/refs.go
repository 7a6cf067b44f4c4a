package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// splitImage splits repository[:tag][@digest] into its parts.
func splitImage(image string) (repo, tag, digest string) {
	repo, digest, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo, tag = repo[:i], repo[i+1:]
	}
	return repo, tag, digest
}

// imageFlag is a flag whose value is an image (the manager's --mover-image).
var imageFlag = regexp.MustCompile(`^--[a-z-]*image=(.*)$`)

// imageRefs returns every image reference in objs, each with where it is: every
// field named image, at any depth, and every --*image= argument.
func imageRefs(objs []*unstructured.Unstructured) map[string][]string {
	refs := map[string][]string{}
	for _, o := range objs {
		walkRefs(o.Object, o.GetKind()+"/"+o.GetName(), refs)
	}
	return refs
}

func walkRefs(v any, at string, refs map[string][]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "image" {
				refs[s] = append(refs[s], at+".image")
				continue
			}
			walkRefs(x, at+"."+k, refs)
		}
	case []any:
		for i, x := range v {
			if s, ok := x.(string); ok {
				if m := imageFlag.FindStringSubmatch(s); m != nil {
					refs[m[1]] = append(refs[m[1]], fmt.Sprintf("%s[%d]", at, i))
				}
				continue
			}
			walkRefs(x, fmt.Sprintf("%s[%d]", at, i), refs)
		}
	}
}

// onlyImage fails unless objs reference want and no other image: the manager's
// container and its --mover-image both.
func onlyImage(source string, objs []*unstructured.Unstructured, want string) error {
	refs := imageRefs(objs)
	var other []string
	for ref, at := range refs {
		if ref != want {
			other = append(other, fmt.Sprintf("%s at %s", ref, strings.Join(at, ", ")))
		}
	}
	slices.Sort(other)
	switch {
	case len(other) > 0:
		return fmt.Errorf("%s references images other than %s: %s", source, want, strings.Join(other, "; "))
	case !slices.ContainsFunc(refs[want], func(at string) bool { return strings.HasSuffix(at, ".image") }):
		return fmt.Errorf("%s deploys no container of %s", source, want)
	case !slices.ContainsFunc(refs[want], func(at string) bool { return strings.HasSuffix(at, "]") }):
		return fmt.Errorf("%s passes no --mover-image=%s", source, want)
	}
	return nil
}
