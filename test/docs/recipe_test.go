package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeRecipeIsTheTestedOne: the README's aws CLI recipe is the one TestDev and
// TestBucketAccessTenants run (testenv.AWSCLIRecipe): the Secret's values as the only
// environment, an upload into and a listing of the Secret's own bucket with
// --endpoint-url, and a listing of the other sample's bucket, refused. A recipe edited
// away from those steps fails here until the tests follow.
func TestReadmeRecipeIsTheTestedOne(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, blocks := Page{Path: "README.md", Text: string(data)}.Split()
	var recipe string
	for _, b := range blocks {
		if b.Info == "sh" && strings.Contains(b.Body, "aws s3 ") {
			recipe = b.Body
		}
	}
	if recipe == "" {
		t.Fatal("README.md has no sh block with the aws CLI recipe")
	}
	for _, step := range []string{
		`kubectl get secret photos-access -o go-template='{{range $k, $v := .data}}export {{$k}}={{$v | base64decode}}{{"\n"}}{{end}}'`,
		`aws s3 cp README.md "s3://$BUCKET_NAME/" --endpoint-url "$AWS_ENDPOINT_URL_S3"`,
		`aws s3 ls "s3://$BUCKET_NAME/" --endpoint-url "$AWS_ENDPOINT_URL_S3"`,
		`aws s3 ls s3://dev-default-reports/ --endpoint-url "$AWS_ENDPOINT_URL_S3"`,
	} {
		if !strings.Contains(recipe, step) {
			t.Errorf("README.md's recipe lacks the step the tests run: %s", step)
		}
	}
	if n := strings.Count(recipe, "aws s3 "); n != 3 {
		t.Errorf("README.md's recipe runs %d aws commands; the tests run its three", n)
	}
}
