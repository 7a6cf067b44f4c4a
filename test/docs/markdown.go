package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// Page is one markdown file of the docs: its path relative to the repository's root and
// its text.
type Page struct {
	Path string
	Text string
}

// generatedPages are written whole by a generator and checked where it runs
// (docs/reference/api.md by make verify): the figure check leaves them out.
var generatedPages = map[string]bool{"docs/reference/api.md": true}

// Pages returns README.md, DEVELOPMENT.md and every markdown file under docs/, sorted.
func Pages(root string) ([]Page, error) {
	paths := []string{"README.md", "DEVELOPMENT.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths[2:])
	pages := make([]Page, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return nil, err
		}
		pages = append(pages, Page{Path: p, Text: string(b)})
	}
	return pages, nil
}

// Root is the repository's root.
func Root() (string, error) { return testenv.RepoRoot() }

// Line is one line of a page outside its fenced code blocks, with its number.
type Line struct {
	N    int
	Text string
}

// NotAppliedMarker, on the line before a ```yaml block, says the block is not an object
// to apply (a fragment), and why: `<!-- docs:not-applied: a patch of spec only -->`.
const NotAppliedMarker = "<!-- docs:not-applied:"

// Block is a fenced code block: its info string (```yaml: "yaml"), the line before the
// fence, the line the fence opens on, and its content.
type Block struct {
	Info   string
	Before string
	N      int
	Body   string
}

// Split returns a page's lines outside fenced code blocks and its fenced code blocks.
func (p Page) Split() (prose []Line, blocks []Block) {
	lines := strings.Split(p.Text, "\n")
	var open *Block
	var body []string
	prev := ""
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		if open != nil {
			if strings.HasPrefix(trimmed, "```") {
				open.Body = strings.Join(body, "\n") + "\n"
				blocks = append(blocks, *open)
				open, body = nil, nil
				continue
			}
			body = append(body, l)
			continue
		}
		if info, ok := strings.CutPrefix(trimmed, "```"); ok {
			open = &Block{Info: strings.TrimSpace(info), Before: prev, N: i + 1}
			continue
		}
		prose = append(prose, Line{N: i + 1, Text: l})
		if trimmed != "" {
			prev = trimmed
		}
	}
	return prose, blocks
}

var (
	headingRE  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlIDRE   = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	linkRE     = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	slugDropRE = regexp.MustCompile(`[^\p{L}\p{N}\s_-]`)
)

// Slug is GitHub's anchor for a heading: lower case, punctuation but hyphens and
// underscores dropped, spaces made hyphens.
func Slug(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = slugDropRE.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

// Anchors is every anchor a page defines: its headings' slugs (a repeated one with
// GitHub's -1, -2 suffixes) and explicit <a id> or <a name> anchors.
func (p Page) Anchors() map[string]bool {
	prose, _ := p.Split()
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose {
		if m := headingRE.FindStringSubmatch(l.Text); m != nil {
			slug := Slug(m[1])
			if n := seen[slug]; n > 0 {
				anchors[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				anchors[slug] = true
			}
			seen[slug]++
		}
		for _, m := range htmlIDRE.FindAllStringSubmatch(l.Text, -1) {
			anchors[m[1]] = true
		}
	}
	return anchors
}

// Link is a link or image target in a page's prose.
type Link struct {
	N      int
	Target string
}

// Links returns the targets of a page's links and images outside code.
func (p Page) Links() []Link {
	prose, _ := p.Split()
	var links []Link
	for _, l := range prose {
		text := codeSpanRE.ReplaceAllString(l.Text, "")
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			links = append(links, Link{N: l.N, Target: m[1]})
		}
	}
	return links
}
