package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckReleaseBinary: the package step takes a binary only as a release builds it:
// for the platform it is packaged for, static (CGO_ENABLED=0), stripped, and with
// -trimpath exactly when it is told so.
func TestCheckReleaseBinary(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"go.mod":  "module example.com/hello\n\ngo 1.26\n",
		"main.go": "package main\n\nimport (\n\t\"fmt\"\n\t\"net\"\n)\n\nfunc main() { fmt.Println(net.IPv4len) }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := func(cgo string, flags ...string) []byte {
		t.Helper()
		out := filepath.Join(dir, "hello")
		cmd := exec.Command(goCommand(), append(append([]string{"build"}, flags...), "-o", out, ".")...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo, "GOOS=linux", "GOARCH=amd64")
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", flags, err, msg)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	release := build("0", "-trimpath", "-ldflags=-s -w")
	for name, c := range map[string]struct {
		data     []byte
		platform string
		trimpath bool
		wantErr  string
	}{
		"a release build":                   {release, "linux/amd64", true, ""},
		"without -trimpath, told so":        {build("0", "-ldflags=-s -w"), "linux/amd64", false, ""},
		"packaged for another architecture": {release, "linux/arm64", true, "was built for linux/amd64"},
		"with -trimpath, told not":          {release, "linux/amd64", false, "-trimpath=false"},
		"without -trimpath":                 {build("0", "-ldflags=-s -w"), "linux/amd64", true, "-trimpath=true"},
		"not stripped":                      {build("0", "-trimpath"), "linux/amd64", true, "not stripped: it has a symbol table"},
		"without DWARF only":                {build("0", "-trimpath", "-ldflags=-w"), "linux/amd64", true, "not stripped: it has a symbol table"},
		"not stripped, flags recorded":      {build("0", "-ldflags=-w"), "linux/amd64", false, "want -ldflags=\"-s -w\""},
		"with cgo":                          {build("1", "-trimpath", "-ldflags=-s -w"), "linux/amd64", true, "want CGO_ENABLED=0"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := checkReleaseBinary("hello", c.platform, c.data, c.trimpath)
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Errorf("checkReleaseBinary: %v, want %q", err, c.wantErr)
			}
		})
	}
}
