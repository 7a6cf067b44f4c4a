package remedy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// apiReasons returns every reason constant the API package declares (Reason* and
// EventReason*), by constant name, read from its source: a reason added there without a
// remedy here fails TestEveryReasonHasARemedy, with no list to keep by hand.
func apiReasons(t *testing.T) map[string]string {
	t.Helper()
	dir := filepath.Join("..", "..", "api", "v1alpha1")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Reason") && !strings.HasPrefix(name.Name, "EventReason") {
						continue
					}
					lit, ok := valueAt(vs, i).(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: %s is not a string literal; this test reads reasons as literals", fset.Position(name.Pos()), name.Name)
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[name.Name] = v
				}
			}
		}
	}
	if len(out) < 40 {
		t.Fatalf("found only %d reason constants in %s: %v", len(out), dir, out)
	}
	return out
}

func valueAt(vs *ast.ValueSpec, i int) ast.Expr {
	if i < len(vs.Values) {
		return vs.Values[i]
	}
	return nil
}

func TestEveryReasonHasARemedy(t *testing.T) {
	declared := map[string]bool{}
	for name, reason := range apiReasons(t) {
		declared[reason] = true
		if _, ok := For(reason); !ok {
			t.Errorf("%s (%q) has no remedy in internal/remedy/table.go", name, reason)
		}
	}
	for _, r := range All() {
		if !declared[r.Reason] {
			t.Errorf("remedy for %q, which api/v1alpha1 does not declare", r.Reason)
		}
	}
}

func TestTableIsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range table {
		if seen[r.Reason] {
			t.Errorf("%s: two remedies", r.Reason)
		}
		seen[r.Reason] = true
		if r.Means == "" || r.Do == "" {
			t.Errorf("%s: Means and Do must both say something", r.Reason)
		}
		for _, s := range []string{r.Means, r.Do} {
			if !strings.HasSuffix(s, ".") {
				t.Errorf("%s: %q: a sentence ends with a full stop", r.Reason, s)
			}
		}
		switch r.State {
		case Fine, Waiting:
		case Blocked:
			if r.Who == Nobody {
				t.Errorf("%s: blocked, but nobody is to act", r.Reason)
			}
		default:
			t.Errorf("%s: unknown state %q", r.Reason, r.State)
		}
	}
}

// TestGuardrailRefusalsNameTheirGuardrail: every reason the reconcilers treat as a
// guardrail refusal (the claim stalls, its keys are revoked) names the setting that
// refused it, so `why` can say which one.
func TestGuardrailRefusalsNameTheirGuardrail(t *testing.T) {
	for _, r := range All() {
		if reconcile.IsGuardrailRefusal(r.Reason) {
			if r.Guardrail == "" {
				t.Errorf("%s is a guardrail refusal but names no guardrail", r.Reason)
			}
			if r.State != Blocked {
				t.Errorf("%s is a guardrail refusal but is %s, not blocked", r.Reason, r.State)
			}
		}
	}
}

func TestForUnknownReason(t *testing.T) {
	if r, ok := For("NoSuchReason"); ok || r.Reason != "NoSuchReason" {
		t.Errorf("For(NoSuchReason) = %+v, %v", r, ok)
	}
	if r, ok := For("Ready"); !ok || r.State != Fine {
		t.Errorf("For(Ready) = %+v, %v", r, ok)
	}
}

// TestOwnershipRemediesKeepTheData: a bucket tagged for another cluster or for another
// claim of the same name is, after a cluster was rebuilt or restored, the claim's own
// data: the remedy says to check that first (the cluster id, the namespace's history),
// and only then to choose another name, which would make an empty bucket beside it.
func TestOwnershipRemediesKeepTheData(t *testing.T) {
	for reason, first := range map[string]string{
		"OwnedByAnotherCluster": "--cluster-id",
		"OwnedByAnotherClaim":   "allowRebindToRecreatedNamespace",
	} {
		r, ok := For(reason)
		if !ok {
			t.Fatalf("no remedy for %s", reason)
		}
		check, rename := strings.Index(r.Do, first), strings.Index(r.Do, "bucketName")
		if check < 0 || (rename >= 0 && rename < check) {
			t.Errorf("%s: %q: first say to check %s (a rebuilt or restored cluster sees its own buckets so), then to choose another name", reason, r.Do, first)
		}
		if r.Who != Either {
			t.Errorf("%s: who acts is %q, want %q: the platform team checks the cluster, the owner renames", reason, r.Who, Either)
		}
	}
}
