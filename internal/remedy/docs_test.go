package remedy

import (
	"path/filepath"
	"testing"

	"github.com/bucketkeeper/bucketkeeper/internal/docblock"
)

// TestReasonsDoc holds the table of reasons in docs/kubectl-plugin.md against Markdown:
// the docs say what `why` says.
func TestReasonsDoc(t *testing.T) {
	docblock.Hold(t, docblock.Block{Path: filepath.Join("..", "..", "docs", "kubectl-plugin.md"), Begin: DocsBegin, End: DocsEnd,
		Want: Markdown(), What: "table of reasons", Writer: "make reasons-doc"})
}
