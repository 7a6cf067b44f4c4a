package main

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func TestCommandEnv(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/home/u", "AWS_PROFILE=prod", "AWS_SESSION_TOKEN=callers", "BUCKET_NAME=other", "AWS_ENDPOINT_URL_S3=http://elsewhere", "MY_VAR=1"}
	data := map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKID"), "AWS_SECRET_ACCESS_KEY": []byte("s3cr3t"), "BUCKET_NAME": []byte("b"), "not.a.name": []byte("x"), "MY_VAR": []byte("2")}
	env, skipped := commandEnv(base, data)
	want := []string{"PATH=/bin", "HOME=/home/u", "AWS_ACCESS_KEY_ID=AKID", "AWS_SECRET_ACCESS_KEY=s3cr3t", "BUCKET_NAME=b", "MY_VAR=2"}
	if !slices.Equal(env, want) {
		t.Errorf("commandEnv:\n got %q\nwant %q", env, want)
	}
	if !slices.Equal(skipped, []string{"not.a.name"}) {
		t.Errorf("skipped %q", skipped)
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
	must(t, o.printExports(&corev1.Secret{Data: map[string][]byte{"V": []byte(value), "bad-name": []byte("x")}}))
	if strings.Contains(out.String(), "bad-name") {
		t.Errorf("--export printed a key that is no variable name:\n%s", out.String())
	}
	script := out.String() + `printf '%s|%s' "$V" "${AWS_PROFILE-unset}"`
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = []string{"AWS_PROFILE=prod", "HOME=/h"}
	got, err := cmd.Output()
	if err != nil || string(got) != value+"|unset" {
		t.Errorf("sh -c on --export's output: %q, %v; want %q", got, err, value+"|unset")
	}
}

// TestRunCommandEnvironment: the command sees the Secret's values and none of the
// caller's AWS_* variables, and a CA bundle in the Secret as an AWS_CA_BUNDLE file.
func TestRunCommandEnvironment(t *testing.T) {
	var out, errOut bytes.Buffer
	o := &envOptions{options: &options{streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}},
		environ: func() []string { return []string{"PATH=/usr/bin:/bin", "AWS_SESSION_TOKEN=callers"} }}
	secret := &corev1.Secret{Data: map[string][]byte{"AWS_SECRET_ACCESS_KEY": []byte("s3cr3t"), "BUCKET_CA_BUNDLE": []byte("PEM")}}
	err := o.runCommand(secret, []string{"sh", "-c", `printf '%s|%s|%s' "${AWS_SESSION_TOKEN-unset}" "$(cat "$AWS_CA_BUNDLE")" "${#AWS_SECRET_ACCESS_KEY}"`})
	if err != nil || out.String() != "unset|PEM|6" {
		t.Errorf("runCommand: %q, %v (stderr %q); want %q", out.String(), err, errOut.String(), "unset|PEM|6")
	}
}
