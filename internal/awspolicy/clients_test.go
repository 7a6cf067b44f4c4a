package awspolicy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// notTheOperators are operations the clients have that the operator and the mover
// never call, so the policy does not allow them.
var notTheOperators = map[string]string{
	"iam DeleteOpenIDConnectProvider": "Roles.DeleteOIDCProvider: tests clean up with it; a provider outlives its roles",
}

var paginator = regexp.MustCompile(`^New([A-Za-z0-9]+)Paginator$`)

// TestEveryOperationOfTheClientsIsListed reads the S3 client (internal/s3) and the
// IAM driver (internal/iam) and finds every SDK operation they can call (c.api.X,
// and the SDK's paginators): each must be in the list. The requests the tests
// really send are checked too, with their conditions (Recorder); this catches a
// call no test reaches.
func TestEveryOperationOfTheClientsIsListed(t *testing.T) {
	for _, pkg := range []struct{ dir, service, sdk string }{{"../s3", "s3", "awss3"}, {"../iam", "iam", "awsiam"}} {
		files, err := filepath.Glob(filepath.Join(pkg.dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				op := ""
				if inner, ok := sel.X.(*ast.SelectorExpr); ok && inner.Sel.Name == "api" {
					op = sel.Sel.Name // c.api.GetObject
				} else if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkg.sdk {
					if m := paginator.FindStringSubmatch(sel.Sel.Name); m != nil {
						op = m[1] // awss3.NewListBucketsPaginator
					}
				}
				if op == "" {
					return true
				}
				found++
				name := pkg.service + " " + op
				if _, ok := notTheOperators[name]; !ok && !listed(pkg.service, op) {
					t.Errorf("%s calls %s, which no action of the list names: add its action to Statements", filepath.Base(file), name)
				}
				return true
			})
		}
		if found < 10 {
			t.Errorf("%s: found %d calls of the SDK, the reading is broken", pkg.dir, found)
		}
	}
}

// listed says whether some action of the list names the operation, in any case.
func listed(svc, op string) bool {
	for _, st := range Statements {
		for _, a := range st.Actions {
			for _, u := range a.Uses {
				if service(a.Name) == svc && u.Operation == op {
					return true
				}
			}
		}
	}
	return false
}
