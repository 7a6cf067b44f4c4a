package awspolicy

import (
	"path/filepath"
	"testing"

	"github.com/bucketkeeper/bucketkeeper/internal/docblock"
)

// TestPolicyDoc holds the policy in docs/access.md to Document: what users copy is
// what the list says.
func TestPolicyDoc(t *testing.T) {
	docblock.Hold(t, docblock.Block{Path: filepath.Join("..", "..", "docs", "access.md"), Begin: DocsBegin, End: DocsEnd,
		Want: DocsBlock(), What: "operator's AWS policy", Writer: "make docs"})
}
