package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestConceptsNameEveryReason: every condition reason and Event reason the API declares
// (api/v1alpha1/conditions.go) is named in docs/concepts.md, so a reason added to the
// API without a word for users fails here.
func TestConceptsNameEveryReason(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "concepts.md"))
	if err != nil {
		t.Fatal(err)
	}
	file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "api", "v1alpha1", "conditions.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	reasons := 0
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Reason") && !strings.HasPrefix(name.Name, "EventReason") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				value, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				reasons++
				if !strings.Contains(string(doc), "`"+value+"`") {
					t.Errorf("docs/concepts.md does not name the reason %s (%s)", value, name.Name)
				}
			}
		}
	}
	if reasons < 40 {
		t.Fatalf("only %d reasons read from conditions.go", reasons)
	}
}
