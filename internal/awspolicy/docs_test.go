package awspolicy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// UpdateDocsEnv, set to 1, makes TestPolicyDoc write the policy into docs/access.md
// instead of failing (make docs).
const UpdateDocsEnv = "BUCKETKEEPER_UPDATE_DOCS"

// TestPolicyDoc holds the policy in docs/access.md to Document: what users copy is
// what the list says.
func TestPolicyDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "access.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), DocsBegin+"\n")
	committed, after, ok2 := strings.Cut(rest, DocsEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no policy between %q and %q", path, DocsBegin, DocsEnd)
	}
	want := DocsBlock()
	if committed == want {
		return
	}
	if os.Getenv(UpdateDocsEnv) == "1" {
		if err := os.WriteFile(path, []byte(before+DocsBegin+"\n"+want+DocsEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: the operator's AWS policy written", path)
		return
	}
	t.Errorf("%s's AWS policy differs from internal/awspolicy (make docs writes it; never edit it by hand):\n--- committed\n%s--- generated\n%s", path, committed, want)
}
