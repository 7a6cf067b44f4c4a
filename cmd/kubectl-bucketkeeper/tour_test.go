package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// asKubectlEnv, set in the environment of the test binary, makes it run the plugin with
// the arguments after "bucketkeeper" instead of the tests: the README's tour is run as
// a user types it, `kubectl bucketkeeper ...`, through a kubectl of the test's own.
const asKubectlEnv = "KUBECTL_BUCKETKEEPER_TEST_AS_KUBECTL"

// asKubectl returns the plugin's arguments when this process is the test's kubectl.
func asKubectl() ([]string, bool) {
	if os.Getenv(asKubectlEnv) != "1" {
		return nil, false
	}
	args := os.Args[1:]
	if len(args) == 0 || args[0] != "bucketkeeper" {
		fmt.Fprintln(os.Stderr, "the test's kubectl runs only `kubectl bucketkeeper ...`")
		os.Exit(2)
	}
	return args[1:], true
}

// kubectlWrapper writes into dir an executable kubectl that runs this test binary as the
// plugin, with the suite's kubeconfig and namespace ns.
func kubectlWrapper(t *testing.T, dir, ns string) {
	t.Helper()
	self, err := os.Executable()
	must(t, err)
	script := fmt.Sprintf("#!/bin/sh\n[ \"$1\" = bucketkeeper ] || exit 2\nshift\n%s=1 exec %q bucketkeeper --kubeconfig %q -n %q \"$@\"\n",
		asKubectlEnv, self, kubeconfig, ns)
	must(t, os.WriteFile(filepath.Join(dir, "kubectl"), []byte(script), 0o700))
}

// readmeTour returns the lines of README.md's sh blocks that run `kubectl bucketkeeper`,
// without their trailing comments.
func readmeTour(t *testing.T) []string {
	t.Helper()
	root, err := testenv.RepoRoot()
	must(t, err)
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	must(t, err)
	var lines []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			in = !in && strings.TrimPrefix(line, "```") == "sh"
		case in && strings.HasPrefix(line, "kubectl bucketkeeper "):
			cmd, _, _ := strings.Cut(line, "   #")
			lines = append(lines, strings.TrimSpace(cmd))
		}
	}
	if len(lines) == 0 {
		t.Fatal("README.md has no `kubectl bucketkeeper` tour")
	}
	return lines
}

// runTourLine runs one line of the tour with sh in dir, as a user's shell would, with
// only PATH and HOME of the test's environment.
func runTourLine(t *testing.T, dir, line string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if exitErr := (*exec.ExitError)(nil); err != nil {
		if !errors.As(err, &exitErr) {
			t.Fatalf("%s: %v", line, err)
		}
		code = exitErr.ExitCode()
	}
	return result{stdout: out.String(), stderr: errOut.String(), code: code}
}
