package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// PluginRecipe is the README's tour with the kubectl plugin: the commands
// cmd/kubectl-bucketkeeper's TestEveryVerbOnAReadyClaim reads from README.md and runs,
// the refused listing with its own bucket's name for dev-default-reports.
var PluginRecipe = []string{
	`kubectl bucketkeeper tree photos`,
	`kubectl bucketkeeper env photos -- sh -c 'aws s3 cp README.md "s3://$BUCKET_NAME/" --endpoint-url "$AWS_ENDPOINT_URL_S3" && aws s3 ls "s3://$BUCKET_NAME/" --endpoint-url "$AWS_ENDPOINT_URL_S3"'`,
	`kubectl bucketkeeper env photos -- sh -c 'aws s3 ls s3://dev-default-reports/ --endpoint-url "$AWS_ENDPOINT_URL_S3"'`,
	`kubectl bucketkeeper why photos`,
}

// TestReadmeTourIsTheTestedOne: the README's tour runs the plugin's commands that the
// plugin's test runs, line by line; a tour edited away from them fails here until the
// test follows.
func TestReadmeTourIsTheTestedOne(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, blocks := Page{Path: "README.md", Text: string(data)}.Split()
	var tour []string
	for _, b := range blocks {
		if b.Info != "sh" || !strings.Contains(b.Body, "kubectl bucketkeeper ") {
			continue
		}
		for _, line := range strings.Split(b.Body, "\n") {
			if cmd, _, _ := strings.Cut(line, "   #"); strings.TrimSpace(cmd) != "" {
				tour = append(tour, strings.TrimSpace(cmd))
			}
		}
	}
	if strings.Join(tour, "\n") != strings.Join(PluginRecipe, "\n") {
		t.Errorf("README.md's plugin tour:\n%s\nthe commands the plugin's test runs:\n%s", strings.Join(tour, "\n"), strings.Join(PluginRecipe, "\n"))
	}
}

// TestReadmeRecipeIsTheTestedOne: the access page's kubectl-only aws CLI recipe is the one
// TestDev and TestAccessSecretAloneWithTheAWSCLI run (testenv.AWSCLIRecipe): the Secret's keys it
// reads by name (testenv.AWSCLIRecipeKeys; never an eval of the whole Secret, which its
// namespace's writers can add keys to) as the only environment, an upload into and a listing of the Secret's own bucket with
// --endpoint-url, and a listing of the other sample's bucket, refused. A recipe edited
// away from those steps fails here until the tests follow.
func TestReadmeRecipeIsTheTestedOne(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "docs", "access.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, blocks := Page{Path: "docs/access.md", Text: string(data)}.Split()
	var recipe string
	for _, b := range blocks {
		if b.Info == "sh" && strings.Contains(b.Body, "aws s3 ") {
			recipe = b.Body
		}
	}
	if recipe == "" {
		t.Fatal("docs/access.md has no sh block with the aws CLI recipe")
	}
	for _, step := range []string{
		`key() { kubectl get secret photos-access -o "jsonpath={.data.$1}" | base64 -d; }`,
		`export AWS_ACCESS_KEY_ID="$(key AWS_ACCESS_KEY_ID)" AWS_SECRET_ACCESS_KEY="$(key AWS_SECRET_ACCESS_KEY)"`,
		`AWS_REGION="$(key AWS_REGION)" AWS_ENDPOINT_URL_S3="$(key AWS_ENDPOINT_URL_S3)" BUCKET_NAME="$(key BUCKET_NAME)"`,
		`aws s3 cp README.md "s3://$BUCKET_NAME/" --endpoint-url "$AWS_ENDPOINT_URL_S3"`,
		`aws s3 ls "s3://$BUCKET_NAME/" --endpoint-url "$AWS_ENDPOINT_URL_S3"`,
		`aws s3 ls s3://dev-default-reports/ --endpoint-url "$AWS_ENDPOINT_URL_S3"`,
	} {
		if !strings.Contains(recipe, step) {
			t.Errorf("docs/access.md's recipe lacks the step the tests run: %s", step)
		}
	}
	if strings.Contains(recipe, "eval") {
		t.Error("docs/access.md's recipe evals what a Secret holds: anyone who may write Secrets in the namespace could run code in the reader's shell")
	}
	for _, k := range testenv.AWSCLIRecipeKeys {
		if !strings.Contains(recipe, k+`="$(key `+k+`)"`) {
			t.Errorf("docs/access.md's recipe does not read %s by name, as the tests give it to the CLI", k)
		}
	}
	if n := strings.Count(recipe, "aws s3 "); n != 3 {
		t.Errorf("docs/access.md's recipe runs %d aws commands; the tests run its three", n)
	}
}
