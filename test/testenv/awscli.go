package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/bucketkeeper/bucketkeeper/internal/localpeers"
)

// AWSCLI returns the aws CLI as users run it (Debian trixie's awscli, v2), from the
// root hack/peers/moto-root.sh unpacks beside moto, with args and with env as its only
// AWS configuration: no config or credentials file, no instance metadata, nothing of
// the test process's AWS_* variables. Its HOME and TMPDIR are dir.
func AWSCLI(ctx context.Context, dir string, env []string, args ...string) (*exec.Cmd, error) {
	argv, settings, err := awsCLICommand(dir)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], args...)...)
	cmd.Env = append(childEnv(dir, settings...), env...)
	cmd.Dir = dir
	return cmd, nil
}

// AWSCLIWrapper writes an executable named aws into bin that runs the aws CLI as
// AWSCLI does, with HOME and TMPDIR in home, and takes every AWS_* variable it is run
// with (the config and credentials files stay /dev/null): a command line or a shell
// script that calls plain "aws", with bin on its PATH, runs the CLI users have.
func AWSCLIWrapper(bin, home string) error {
	argv, settings, err := awsCLICommand(home)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("#!/bin/sh\nexec /usr/bin/env")
	for _, w := range append(append([]string{"TMPDIR=" + home}, settings...), argv...) {
		b.WriteString(" '" + strings.ReplaceAll(w, "'", `'\''`) + "'")
	}
	b.WriteString(` "$@"` + "\n")
	return os.WriteFile(filepath.Join(bin, "aws"), []byte(b.String()), 0o755)
}

// awsCLICommand is the command line that runs the aws CLI through the moto root's
// loader and python3, and the environment settings that keep it to what it is given.
func awsCLICommand(home string) (argv, settings []string, err error) {
	root, err := localpeers.Binary("moto")
	if err != nil {
		return nil, nil, err
	}
	loaders, _ := filepath.Glob(filepath.Join(root, "usr/lib/*-linux-gnu/ld-linux*.so.*"))
	if len(loaders) != 1 {
		return nil, nil, fmt.Errorf("testenv: want one dynamic loader in %s, found %v", root, loaders)
	}
	aws := filepath.Join(root, "usr/bin/aws")
	if _, err := os.Stat(aws); err != nil {
		return nil, nil, fmt.Errorf("testenv: the aws CLI is missing from %s: %w", root, err)
	}
	argv = []string{loaders[0], "--library-path", filepath.Dir(loaders[0]), filepath.Join(root, "usr/bin/python3"), aws}
	settings = []string{"HOME=" + home, "PYTHONHOME=" + filepath.Join(root, "usr"), "PYTHONNOUSERSITE=1", "PYTHONDONTWRITEBYTECODE=1",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true", "AWS_PAGER="}
	return argv, settings, nil
}

// AWSCLIRecipeKeys are the keys of an access Secret that docs/access.md's recipe reads by
// name and exports, all the aws CLI is given: never the whole Secret, which anyone who
// may write Secrets in its namespace can add variables to.
var AWSCLIRecipeKeys = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL_S3", "BUCKET_NAME"}

// AWSCLIRecipe runs the README's recipe for an access Secret with the aws CLI users have,
// given nothing but the Secret's AWSCLIRecipeKeys as environment: an upload into bucket (the
// Secret's own) and a listing of it, both in the portable form that passes
// --endpoint-url endpoint and in the form that relies on AWS_ENDPOINT_URL_S3 alone
// (read by v2.13 and later), then a listing of otherBucket, which the store must refuse
// 403 AccessDenied. dir is the CLI's HOME and scratch directory. The error says which step
// failed, with the CLI's output.
func AWSCLIRecipe(ctx context.Context, dir string, secret map[string][]byte, endpoint, bucket, otherBucket string) error {
	env := make([]string, 0, len(AWSCLIRecipeKeys))
	for _, k := range AWSCLIRecipeKeys {
		if v, ok := secret[k]; ok {
			env = append(env, k+"="+string(v))
		}
	}
	file := filepath.Join(dir, "upload.txt")
	if err := os.WriteFile(file, []byte("from the aws CLI"), 0o600); err != nil {
		return err
	}
	aws := func(args ...string) (string, error) {
		cmd, err := AWSCLI(ctx, dir, env, args...)
		if err != nil {
			return "", err
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, form := range []struct {
		name string
		args []string
	}{
		{"--endpoint-url", []string{"--endpoint-url", endpoint}},
		{"AWS_ENDPOINT_URL_S3 alone", nil},
	} {
		key := "aws-cli/" + strings.ReplaceAll(form.name, " ", "-")
		if out, err := aws(append([]string{"s3", "cp", file, "s3://" + bucket + "/" + key}, form.args...)...); err != nil {
			return fmt.Errorf("aws s3 cp (%s) into %s: %w\n%s", form.name, bucket, err, out)
		}
		out, err := aws(append([]string{"s3", "ls", "s3://" + bucket + "/aws-cli/"}, form.args...)...)
		if err != nil || !strings.Contains(out, strings.TrimPrefix(key, "aws-cli/")) {
			return fmt.Errorf("aws s3 ls (%s) of %s: %v, want %s listed\n%s", form.name, bucket, err, key, out)
		}
	}
	// The refusal is read from the store's answer, which --debug logs, not from the CLI's
	// message: Ceph RGW's AccessDenied carries an empty <Message>, on which aws CLI 2.23's
	// S3 error formatter fails ("argument of type 'NoneType' is not iterable").
	out, err := aws("s3", "ls", "s3://"+otherBucket+"/", "--endpoint-url", endpoint, "--debug")
	if err == nil || !strings.Contains(out, `HTTP/1.1" 403 `) || !strings.Contains(out, "<Code>AccessDenied</Code>") {
		return fmt.Errorf("aws s3 ls of %s with the Secret of %s: %v, want a 403 AccessDenied\n%s", otherBucket, bucket, err, Tail(out, 4096))
	}
	return nil
}
