package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// ourModule is the operator's module path; every module under it is ours and under
// the repository's LICENSE.
const ourModule = "github.com/bucketkeeper/bucketkeeper"

// A build is one binary we ship: a package of a module of ours, for every platform it
// is released for.
type build struct {
	Name      string   // the binary's name
	ModuleDir string   // the module's directory, relative to the repository root
	Package   string   // the main package, relative to ModuleDir
	Platforms []string // GOOS/GOARCH
}

// shipped are the binaries a release holds: the operator in the image, and the
// kubectl plugin in the krew archives (hack/plugin-dist.sh's platforms).
var shipped = []build{
	{Name: "bucketkeeper", ModuleDir: ".", Package: "./cmd/bucketkeeper", Platforms: []string{"linux/amd64", "linux/arm64"}},
	{Name: "kubectl-bucketkeeper", ModuleDir: "cmd/kubectl-bucketkeeper", Package: ".",
		Platforms: []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64"}},
}

// A module linked into a binary, with what its licence files say.
type module struct {
	Path, Version string
	Dir           string   // its source: the module cache, or ours
	Files         []string // its licence and NOTICE files, relative to Dir
	Licences      []string // SPDX identifiers classify found in the licence files
}

// Ours reports whether the module is this repository's.
func (m module) Ours() bool {
	return m.Path == ourModule || strings.HasPrefix(m.Path, ourModule+"/")
}

// name is the module's path and version, as go.mod writes them.
func (m module) name() string {
	return strings.TrimSpace(m.Path + " " + m.Version)
}

// listModules returns the modules whose packages b links on any of its platforms,
// sorted by path, as go list sees them (it loads packages and compiles nothing): the
// same set the linker puts in the binary's build information. The standard library is
// not a module; stdlibModule stands for it.
func listModules(root string, b build) ([]module, error) {
	byPath := map[string]module{}
	for _, p := range b.Platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		cmd := exec.Command(goCommand(), "list", "-deps",
			"-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{with .Replace}}{{.Version}} {{.Dir}}{{else}}{{.Version}} {{.Dir}}{{end}}{{end}}{{end}}",
			b.Package)
		cmd.Dir = filepath.Join(root, b.ModuleDir)
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list -deps %s for %s: %v\n%s", b.Package, p, err, stderr.String())
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 0 {
				continue
			}
			m := module{Path: f[0]}
			switch len(f) {
			case 3:
				m.Version, m.Dir = f[1], f[2]
			case 2: // replaced by a directory: no version
				m.Dir = f[1]
			default:
				return nil, fmt.Errorf("go list: unexpected line %q", sc.Text())
			}
			byPath[m.Path] = m
		}
	}
	// The main module itself (the operator's packages in its binary) is ours as well.
	main := module{Path: ourModule, Dir: root}
	byPath[main.Path] = main
	mods := make([]module, 0, len(byPath))
	for _, m := range byPath {
		mods = append(mods, m)
	}
	slices.SortFunc(mods, func(a, b module) int { return strings.Compare(a.Path, b.Path) })
	return mods, nil
}

// stdlibModule stands for the Go standard library, linked into every binary, under
// the toolchain's LICENSE.
func stdlibModule() (module, error) {
	out, err := exec.Command(goCommand(), "env", "GOROOT", "GOVERSION").Output()
	if err != nil {
		return module{}, fmt.Errorf("go env: %w", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return module{}, fmt.Errorf("go env GOROOT GOVERSION: %q", out)
	}
	return module{Path: "stdlib", Version: f[1], Dir: f[0]}, nil
}

// licenceFile matches the names of the files that hold a module's licence terms or
// notices at its root: LICENSE, LICENCE, COPYING, UNLICENSE and NOTICE, with any
// extension or suffix (LICENSE.txt, LICENSE-APACHE, COPYING.md).
var licenceFile = regexp.MustCompile(`(?i)^(licen[cs]e|copying|unlicen[cs]e|notice)([._-].*)?$`)

// noticeFile matches the NOTICE files among them: carried into the notices, never
// classified (Apache-2.0 section 4(d) asks that they travel with the binary).
var noticeFile = regexp.MustCompile(`(?i)^notice([._-].*)?$`)

// readLicences fills m.Files and m.Licences from the files at the module's root.
func readLicences(m *module) error {
	entries, err := os.ReadDir(m.Dir)
	if err != nil {
		return fmt.Errorf("%s: %w", m.Path, err)
	}
	m.Files, m.Licences = nil, nil
	for _, e := range entries {
		if !e.Type().IsRegular() || !licenceFile.MatchString(e.Name()) {
			continue
		}
		m.Files = append(m.Files, e.Name())
		if noticeFile.MatchString(e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(m.Dir, e.Name()))
		if err != nil {
			return err
		}
		m.Licences = append(m.Licences, classify(string(data))...)
	}
	slices.Sort(m.Licences)
	m.Licences = slices.Compact(m.Licences)
	return nil
}

// checkLicences reads every module's licence files and returns one line per module
// whose licence is unknown (no licence file, or none the classifier knows) or not
// compatible with shipping it in an Apache-2.0 binary; none when all are.
func checkLicences(mods []module) ([]string, error) {
	var problems []string
	for i := range mods {
		m := &mods[i]
		if err := readLicences(m); err != nil {
			return nil, err
		}
		ok, bad := compatible(m.Licences)
		switch {
		case ok && m.Ours() && !slices.Equal(m.Licences, []string{"Apache-2.0"}):
			problems = append(problems, fmt.Sprintf("%s: ours, but its licence files say %v, not Apache-2.0 alone", m.name(), m.Licences))
		case ok:
		case len(m.Files) == 0:
			problems = append(problems, fmt.Sprintf("%s: no licence file at the module's root (%s)", m.name(), m.Dir))
		case len(m.Licences) == 0:
			problems = append(problems, fmt.Sprintf("%s: unknown licence in %s", m.name(), strings.Join(m.Files, ", ")))
		default:
			problems = append(problems, fmt.Sprintf("%s: %s, which an Apache-2.0 binary may not link (found %v in %s)",
				m.name(), strings.Join(bad, ", "), m.Licences, strings.Join(m.Files, ", ")))
		}
	}
	return problems, nil
}

// goCommand is the go command the Makefile runs with ($GO), or go.
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// apacheOfKubernetes returns the LICENSE of k8s.io/apimachinery as the operator's
// module requires it: the Apache-2.0 text the repository's LICENSE is a copy of.
func apacheOfKubernetes(root string) ([]byte, error) {
	cmd := exec.Command(goCommand(), "list", "-m", "-f", "{{.Dir}}", "k8s.io/apimachinery")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m k8s.io/apimachinery: %w", err)
	}
	return os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "LICENSE"))
}
