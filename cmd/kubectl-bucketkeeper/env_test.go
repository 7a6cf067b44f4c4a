package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

func TestCommandEnv(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/home/u", "AWS_PROFILE=prod", "AWS_SESSION_TOKEN=callers", "BUCKET_NAME=other", "AWS_ENDPOINT_URL_S3=http://elsewhere", "MY_VAR=1"}
	data := map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKID"), "AWS_SECRET_ACCESS_KEY": []byte("s3cr3t"), "BUCKET_NAME": []byte("b")}
	env := commandEnv(base, data)
	want := []string{"PATH=/bin", "HOME=/home/u", "MY_VAR=1", "AWS_ACCESS_KEY_ID=AKID", "AWS_SECRET_ACCESS_KEY=s3cr3t", "BUCKET_NAME=b"}
	if !slices.Equal(env, want) {
		t.Errorf("commandEnv:\n got %q\nwant %q", env, want)
	}
}

// TestListedKeysAreVariableNames: every key env may pass on is a variable name and
// begins with AWS_ or BUCKET_, which commandEnv and printExports take away from the
// caller's own environment first: what the command gets of each is the Secret's.
func TestListedKeysAreVariableNames(t *testing.T) {
	for _, list := range [][]string{bkv1.ConnectionSecretKeys, bkv1.AccessSecretKeys} {
		for _, k := range list {
			if !envName.MatchString(k) || !strings.HasPrefix(k, "AWS_") && !strings.HasPrefix(k, "BUCKET_") {
				t.Errorf("listed key %q is no AWS_ or BUCKET_ variable name", k)
			}
		}
	}
}

// TestExportsRoundTrip: what --export prints, evaluated by sh, gives back the values
// byte for byte (quotes, dollars, newlines), and unsets the caller's AWS_* variables
// the Secret does not set.
func TestExportsRoundTrip(t *testing.T) {
	var out bytes.Buffer
	o := &envOptions{options: &options{streams: genericiooptions.IOStreams{Out: &out}},
		environ: func() []string { return []string{"AWS_PROFILE=prod", "HOME=/h"} }}
	value := "it's $HOME `x` \"q\"\nline2\\"
	must(t, o.printExports(map[string][]byte{"BUCKET_NAME": []byte(value), "bad-name": []byte("x")}))
	if strings.Contains(out.String(), "bad-name") {
		t.Errorf("--export printed a key that is no variable name:\n%s", out.String())
	}
	script := out.String() + `printf '%s|%s' "$BUCKET_NAME" "${AWS_PROFILE-unset}"`
	for _, shell := range []string{"sh", "bash"} {
		cmd := exec.Command(shell, "-c", script)
		cmd.Env = []string{"AWS_PROFILE=prod", "HOME=/h"}
		got, err := cmd.Output()
		if err != nil || string(got) != value+"|unset" {
			t.Errorf("%s -c on --export's output: %q, %v; want %q", shell, got, err, value+"|unset")
		}
	}
}

// TestRunCommandEnvironment: the command sees the Secret's values and none of the
// caller's AWS_* variables, and a CA bundle in the Secret as an AWS_CA_BUNDLE file.
func TestRunCommandEnvironment(t *testing.T) {
	var out, errOut bytes.Buffer
	o := &envOptions{options: &options{streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}},
		environ: func() []string { return []string{"PATH=/usr/bin:/bin", "AWS_SESSION_TOKEN=callers"} }}
	data := map[string][]byte{"AWS_SECRET_ACCESS_KEY": []byte("s3cr3t"), "BUCKET_CA_BUNDLE": []byte("PEM")}
	err := o.runCommand(data, []string{"sh", "-c", `printf '%s|%s|%s' "${AWS_SESSION_TOKEN-unset}" "$(cat "$AWS_CA_BUNDLE")" "${#AWS_SECRET_ACCESS_KEY}"`})
	if err != nil || out.String() != "unset|PEM|6" {
		t.Errorf("runCommand: %q, %v (stderr %q); want %q", out.String(), err, errOut.String(), "unset|PEM|6")
	}
}

// TestDocsListTheKeysEnvPasses: docs/kubectl-plugin.md's table of the keys env passes
// on is the API's lists.
func TestDocsListTheKeysEnvPasses(t *testing.T) {
	root, err := testenv.RepoRoot()
	must(t, err)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "kubectl-plugin.md"))
	must(t, err)
	for row, want := range map[string][]string{"| a BucketAccess's |": bkv1.AccessSecretKeys, "| a StorageBucket's connection Secret |": bkv1.ConnectionSecretKeys} {
		var line string
		for _, l := range strings.Split(string(doc), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), row) {
				line = l
			}
		}
		var got []string
		for _, m := range regexp.MustCompile("`([A-Z0-9_]+)`").FindAllStringSubmatch(line, -1) {
			got = append(got, m[1])
		}
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			t.Errorf("docs/kubectl-plugin.md's row %q lists %q; env passes on %q", row, got, want)
		}
	}
}
