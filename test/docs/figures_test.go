package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// measuredRE matches what only a measurement writes: a ratio (1.5×), a decimal figure
// with a unit of time, size or share (21.9 s, 9.3 KiB, 0.5%), CPU seconds, a rate per
// second of buckets, probes or requests, and an approximation (~13 min).
var measuredRE = regexp.MustCompile(`\d(?:\.\d+)?\s?×|\d\.\d+\s?(?:ns|µs|ms|s|sec|seconds?|min|minutes?|h|hours?|B|KiB|MiB|GiB|KB|MB|GB|%)(?:\W|$)|CPU[- ]s(?:econds?)?\b|\d\s?(?:buckets|probes|requests)/s\b|~\s?\d`)

// generatedRE matches a generated block's markers: the figures between them are a
// generator's, held against their source by the tests that generate them.
var generatedRE = regexp.MustCompile(`<!-- ([\w-]+:[\w-]+) (begin|end)\b`)

// TestNoHandWrittenFigures: no measured figure appears in the docs outside a generated
// block, so a figure cannot go stale in prose while the results move on.
func TestNoHandWrittenFigures(t *testing.T) {
	_, pages := loadPages(t)
	for _, p := range pages {
		if generatedPages[p.Path] {
			continue
		}
		for _, f := range handWrittenFigures(p) {
			t.Errorf("%s: a measured figure outside a generated block (write it from bench/results, or say it without the figure): %s", p.Path, f)
		}
	}
}

// handWrittenFigures lists "line N: text" for each line outside generated blocks with a
// measured figure, code blocks included.
func handWrittenFigures(p Page) []string {
	var found []string
	inside := ""
	for i, l := range strings.Split(p.Text, "\n") {
		if m := generatedRE.FindStringSubmatch(l); m != nil {
			if m[2] == "begin" {
				inside = m[1]
			} else if m[1] == inside {
				inside = ""
			}
			continue
		}
		if inside == "" && measuredRE.MatchString(l) {
			found = append(found, "line "+strconv.Itoa(i+1)+": "+strings.TrimSpace(l))
		}
	}
	return found
}

// TestFigureCheckFindsFigures pins what counts as a measured figure, and what does not
// (limits and defaults, versions, codes).
func TestFigureCheckFindsFigures(t *testing.T) {
	for _, line := range []string{"converge at 1.90× the floor", "RSS 89.2 MiB", "p99 0.01s", "16.1 CPU-s", "39.7 buckets/s", "~13 min", "a share of 0.5%"} {
		if !measuredRE.MatchString(line) {
			t.Errorf("%q is not seen as a measured figure", line)
		}
	}
	for _, line := range []string{"--sync-interval (default 10m)", "at most 64 KiB", "Kubernetes 1.31 or later", "409 BucketAlreadyOwnedByYou", "TLS 1.2 or later", "`2012-10-17`", "more than 90% of its quota"} {
		if measuredRE.MatchString(line) {
			t.Errorf("%q is taken for a measured figure", line)
		}
	}
	p := Page{Path: "x.md", Text: "<!-- bench-results:a begin (generated) -->\n| 1.90× |\n<!-- bench-results:a end -->\nprose 1.90×\n"}
	if got := handWrittenFigures(p); len(got) != 1 || !strings.HasPrefix(got[0], "line 4:") {
		t.Errorf("hand-written figures %v, want line 4 only", got)
	}
}

// TestBenchFigures: the generated blocks of docs/performance.md are what their generator
// writes from bench/results; BUCKETKEEPER_UPDATE_DOCS=1 (make docs) writes them.
func TestBenchFigures(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, BenchPage)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	generated, stale, err := BenchBlocks(root, string(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) == 0 {
		return
	}
	if os.Getenv(UpdateEnv) == "1" {
		if err := os.WriteFile(file, []byte(generated), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d generated blocks written from bench/results", BenchPage, len(stale))
		return
	}
	for _, s := range stale {
		t.Errorf("%s: a generated block differs from what make docs writes from bench/results (run make docs; never edit it by hand): %s", BenchPage, s)
	}
}
