package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// AWSCLI returns the aws CLI as users run it (Debian trixie's awscli, v2), from the
// root hack/peers/moto-root.sh unpacks beside moto, with args and with env as its only
// AWS configuration: no config or credentials file, no instance metadata, nothing of
// the test process's AWS_* variables. Its HOME and TMPDIR are dir.
func AWSCLI(ctx context.Context, dir string, env []string, args ...string) (*exec.Cmd, error) {
	root, err := peerBinary("moto")
	if err != nil {
		return nil, err
	}
	loaders, _ := filepath.Glob(filepath.Join(root, "usr/lib/*-linux-gnu/ld-linux*.so.*"))
	if len(loaders) != 1 {
		return nil, fmt.Errorf("testenv: want one dynamic loader in %s, found %v", root, loaders)
	}
	aws := filepath.Join(root, "usr/bin/aws")
	if _, err := os.Stat(aws); err != nil {
		return nil, fmt.Errorf("testenv: the aws CLI is missing from %s: %w", root, err)
	}
	cmd := exec.CommandContext(ctx, loaders[0], append([]string{"--library-path", filepath.Dir(loaders[0]),
		filepath.Join(root, "usr/bin/python3"), aws}, args...)...)
	cmd.Env = append(childEnv(dir,
		"HOME="+dir, "PYTHONHOME="+filepath.Join(root, "usr"), "PYTHONNOUSERSITE=1", "PYTHONDONTWRITEBYTECODE=1",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_PAGER="), env...)
	cmd.Dir = dir
	return cmd, nil
}
