package remedy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// UpdateDocsEnv, set to 1, makes TestReasonsDoc write the table into the docs instead of
// failing (make reasons-doc).
const UpdateDocsEnv = "BUCKETKEEPER_UPDATE_DOCS"

// TestReasonsDoc holds the table of reasons in docs/kubectl-plugin.md against Markdown:
// the docs say what `why` says.
func TestReasonsDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "kubectl-plugin.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), DocsBegin+"\n")
	committed, after, ok2 := strings.Cut(rest, DocsEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no table between %q and %q", path, DocsBegin, DocsEnd)
	}
	want := Markdown()
	if committed == want {
		return
	}
	if os.Getenv(UpdateDocsEnv) == "1" {
		if err := os.WriteFile(path, []byte(before+DocsBegin+"\n"+want+DocsEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: table of reasons written", path)
		return
	}
	t.Errorf("%s's table of reasons differs from internal/remedy (make reasons-doc writes it):\n--- committed\n%s--- generated\n%s", path, committed, want)
}
