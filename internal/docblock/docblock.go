// Package docblock holds a generated block of a doc page to its generator, for the
// tests that keep docs from drifting: the block between two marker lines must be what
// the code generates, and BUCKETKEEPER_UPDATE_DOCS=1 (make docs) writes it instead of
// failing.
package docblock

import (
	"os"
	"strings"
	"testing"
)

// UpdateEnv, set to 1, makes Hold write the block instead of failing.
const UpdateEnv = "BUCKETKEEPER_UPDATE_DOCS"

// Block is a generated part of a doc page: the lines between Begin and End (each a
// line of its own) are Want. What names it in messages ("the table of reasons"), and
// Writer says which make target writes it.
type Block struct {
	Path, Begin, End, Want, What, Writer string
}

// Hold fails t when the page's block differs from Want, or writes Want there when
// UpdateEnv is 1.
func Hold(t testing.TB, b Block) {
	t.Helper()
	doc, err := os.ReadFile(b.Path)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), b.Begin+"\n")
	committed, after, ok2 := strings.Cut(rest, b.End)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no %s between %q and %q", b.Path, b.What, b.Begin, b.End)
	}
	if committed == b.Want {
		return
	}
	if os.Getenv(UpdateEnv) == "1" {
		if err := os.WriteFile(b.Path, []byte(before+b.Begin+"\n"+b.Want+b.End+after), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s written", b.Path, b.What)
		return
	}
	t.Errorf("%s's %s differs from what the code generates (%s writes it; never edit it by hand):\n--- committed\n%s--- generated\n%s",
		b.Path, b.What, b.Writer, committed, b.Want)
}
