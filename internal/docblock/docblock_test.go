package docblock

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// failures is a testing.TB that keeps what Hold reports instead of failing.
type failures struct {
	testing.TB
	errors []string
}

func (f *failures) Helper() {}
func (f *failures) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func TestHoldFailsOnAStaleBlockAndWritesItOnRequest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "page.md")
	if err := os.WriteFile(path, []byte("intro\n<!-- b -->\nold\n<!-- e -->\noutro\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := Block{Path: path, Begin: "<!-- b -->", End: "<!-- e -->", Want: "new\n", What: "the table", Writer: "make docs"}

	stale := &failures{TB: t}
	Hold(stale, b)
	if len(stale.errors) != 1 {
		t.Fatalf("a stale block: %d failures, want 1", len(stale.errors))
	}

	t.Setenv(UpdateEnv, "1")
	Hold(t, b)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n<!-- b -->\nnew\n<!-- e -->\noutro\n"; string(got) != want {
		t.Fatalf("written page:\n%s\nwant:\n%s", got, want)
	}
	t.Setenv(UpdateEnv, "")
	fresh := &failures{TB: t}
	Hold(fresh, b)
	if len(fresh.errors) != 0 {
		t.Fatalf("a fresh block failed: %v", fresh.errors)
	}
}
