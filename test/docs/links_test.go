package docs

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinksResolve: every relative link and image of the docs leads to a file or
// directory of the repository, and every #anchor to a heading or <a id> of its page.
func TestLinksResolve(t *testing.T) {
	root, pages := loadPages(t)
	anchors := map[string]map[string]bool{}
	for _, p := range pages {
		anchors[p.Path] = p.Anchors()
	}
	checked := 0
	for _, p := range pages {
		for _, l := range p.Links() {
			target := l.Target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := p.Path
			if file != "" {
				dest = path.Clean(path.Join(path.Dir(p.Path), file))
				if strings.HasPrefix(dest, "../") {
					t.Errorf("%s:%d: %s leaves the repository", p.Path, l.N, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
					t.Errorf("%s:%d: %s: no such file", p.Path, l.N, target)
					continue
				}
			}
			if anchor != "" {
				set, ok := anchors[dest]
				if !ok {
					t.Errorf("%s:%d: %s: an anchor into %s, which is not a page of the docs", p.Path, l.N, target, dest)
				} else if !set[anchor] {
					t.Errorf("%s:%d: %s: %s has no heading or <a id> with the anchor #%s", p.Path, l.N, target, dest, anchor)
				}
			}
			checked++
		}
	}
	if checked < 50 {
		t.Fatalf("only %d relative links checked; the link parser misses links", checked)
	}
}

// TestSlug pins GitHub's anchors for the heading shapes the docs use.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Adoption takes only the operator's own account's buckets": "adoption-takes-only-the-operators-own-accounts-buckets",
		"`BucketkeeperBucketUnavailable`":                          "bucketkeeperbucketunavailable",
		"The receiver (webhook)":                                   "the-receiver-webhook",
		"How `make test` runs":                                     "how-make-test-runs",
		"bucketkeeper.io/v1alpha1":                                 "bucketkeeperiov1alpha1",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestLinkCheckFindsBrokenLinks: the check itself sees a missing file and a missing anchor.
func TestLinkCheckFindsBrokenLinks(t *testing.T) {
	p := Page{Path: "docs/x.md", Text: "# Title\n\nSee [a](#title), [b](#nope) and `[c](#code)`.\n\n```\n[d](#fenced)\n```\n"}
	links := p.Links()
	if len(links) != 2 || links[0].Target != "#title" || links[1].Target != "#nope" {
		t.Fatalf("links %v, want #title and #nope (none from code)", links)
	}
	if a := p.Anchors(); !a["title"] || a["nope"] {
		t.Fatalf("anchors %v, want title only", a)
	}
}

func loadPages(t *testing.T) (string, []Page) {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("%d pages found, want README.md, DEVELOPMENT.md and docs/", len(pages))
	}
	return root, pages
}
