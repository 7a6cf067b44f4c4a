package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// DevelopmentPage names the tests behind the user pages' promises; the user pages name
// none.
const DevelopmentPage = "DEVELOPMENT.md"

// ThreatModelHeading heads DEVELOPMENT.md's table of the threat model's promises
// (docs/multi-tenancy.md) and the tests that try each.
const ThreatModelHeading = "### The threat model and its tests"

// testNameExempt is the one section of a user page that may name Go tests, by page and
// heading: the AWS policy's, whose tests are the policy's only proof on AWS's shape.
var testNameExempt = map[string]string{"docs/access.md": "## The operator's policy on AWS"}

var (
	testFuncRE  = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]*)\(`)
	testNameRE  = regexp.MustCompile(`^Test[A-Z][A-Za-z0-9_]*$`)
	testWordRE  = regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9_]*`)
	codeSpansRE = regexp.MustCompile("`([^`]*)`")
)

// repoTests is every test function of the repository's _test.go files, nested modules
// included.
func repoTests(t *testing.T, root string) map[string]bool {
	t.Helper()
	tests := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range testFuncRE.FindAllStringSubmatch(string(data), -1) {
			tests[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) < 100 {
		t.Fatalf("only %d test functions found in the repository", len(tests))
	}
	return tests
}

// citedTests returns each test a page names in a code span of its prose (`TestX`),
// with the line it is on.
func citedTests(p Page) map[string]int {
	prose, _ := p.Split()
	cited := map[string]int{}
	for _, l := range prose {
		for _, m := range codeSpansRE.FindAllStringSubmatch(l.Text, -1) {
			if testNameRE.MatchString(m[1]) {
				if _, ok := cited[m[1]]; !ok {
					cited[m[1]] = l.N
				}
			}
		}
	}
	return cited
}

// TestCitedTestsExist: every test DEVELOPMENT.md names is a test function of the
// repository, so a renamed or removed test cannot leave a promise pointing at nothing;
// every row of its threat-model table names at least one; and no user page (README.md,
// docs/) names a Go test: they say what is guaranteed, DEVELOPMENT.md which test holds it.
func TestCitedTestsExist(t *testing.T) {
	root, pages := loadPages(t)
	tests := repoTests(t, root)
	for _, p := range pages {
		if p.Path == DevelopmentPage {
			cited := citedTests(p)
			if len(cited) < 50 {
				t.Errorf("%s names only %d tests", p.Path, len(cited))
			}
			for name, n := range cited {
				if !tests[name] {
					t.Errorf("%s:%d: %s is no test of the repository (renamed or removed? say which test holds the promise now)", p.Path, n, name)
				}
			}
			checkThreatModelTable(t, p)
			continue
		}
		if generatedPages[p.Path] {
			continue
		}
		for _, l := range userPageTestNames(p) {
			t.Errorf("%s:%d: a user page names the Go test %s; say the promise in user words and name the test in %s", p.Path, l.N, l.Text, DevelopmentPage)
		}
	}
}

// checkThreatModelTable: the table under ThreatModelHeading has rows, and each names a
// test in its last column.
func checkThreatModelTable(t *testing.T, p Page) {
	t.Helper()
	_, rest, ok := strings.Cut(p.Text, "\n"+ThreatModelHeading+"\n")
	if !ok {
		t.Errorf("%s has no section %q", p.Path, ThreatModelHeading)
		return
	}
	rows := 0
	for _, l := range strings.Split(rest, "\n") {
		if strings.HasPrefix(l, "#") {
			break
		}
		if !strings.HasPrefix(l, "|") || strings.HasPrefix(l, "|---") || strings.HasPrefix(l, "| promise |") {
			continue
		}
		rows++
		cells := strings.Split(strings.Trim(l, "|"), " | ")
		if !testWordRE.MatchString(cells[len(cells)-1]) {
			t.Errorf("%s: the threat model's promise %q names no test", p.Path, strings.TrimSpace(cells[0]))
		}
	}
	if rows < 20 {
		t.Errorf("%s: the threat model's table has only %d rows", p.Path, rows)
	}
}

// userPageTestNames returns the lines of a user page, code included, that name a Go
// test, but those of its exempt section.
func userPageTestNames(p Page) []Line {
	var found []Line
	exempt, inExempt := testNameExempt[p.Path], false
	for i, l := range strings.Split(p.Text, "\n") {
		if strings.HasPrefix(l, "## ") || strings.HasPrefix(l, "# ") {
			inExempt = exempt != "" && l == exempt
		}
		if inExempt {
			continue
		}
		for _, name := range testWordRE.FindAllString(l, -1) {
			found = append(found, Line{N: i + 1, Text: name})
		}
	}
	return found
}

// TestCitedTestsCheckFindsNames pins what the check reads: test names in code spans of
// DEVELOPMENT.md's prose, and any Test word of a user page outside its exempt section.
func TestCitedTestsCheckFindsNames(t *testing.T) {
	dev := Page{Path: DevelopmentPage, Text: "`TestA` and `TestB` (`test/e2e`), not `TestPaced...` nor `go test -run TestC`\n\n```\n`TestD`\n```\n"}
	got := citedTests(dev)
	if len(got) != 2 || got["TestA"] != 1 || got["TestB"] != 1 {
		t.Errorf("cited %v, want TestA and TestB on line 1", got)
	}
	user := Page{Path: "docs/access.md", Text: "# Access\n\nTestOne here.\n\n## The operator's policy on AWS\n\nTestTwo is fine here.\n\n## Store health\n\n`TestThree`\n"}
	lines := userPageTestNames(user)
	if len(lines) != 2 || lines[0].Text != "TestOne" || lines[1].Text != "TestThree" || lines[1].N != 11 {
		t.Errorf("user page names %v, want TestOne (line 3) and TestThree (line 11)", lines)
	}
}
