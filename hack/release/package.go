package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// release is what `release package` makes a release of.
type release struct {
	Root     string    // the repository
	Tag      string    // vX.Y.Z
	Version  string    // X.Y.Z: the chart's version and appVersion, the image's tag
	Repo     string    // the image's repository
	Revision string    // the commit
	Created  time.Time // the commit's time: every date in the artifacts
	Bin      string    // the built binaries and the licence step's outputs
	Dist     string    // where the artifacts go
	// Trimpath: the binaries were built with -trimpath, as a release's are; make
	// test's dry-run builds them without (the Makefile's RELEASE_TRIMPATH).
	Trimpath bool
	// Platforms: the operator's platforms, whose binaries are in Bin and whose images
	// the index holds (a release's: all of them; make test's dry-run: linux/amd64,
	// the one its cluster runs, as a second architecture's compile is most of the
	// dry-run's CPU and tests nothing the release workflow does not).
	Platforms []string
	// PluginPlatforms: the platforms whose krew archives are in Dist (make test's
	// dry-run builds the linux one).
	PluginPlatforms []string
}

func (r release) image() string { return r.Repo + ":" + r.Version }

// Names of the artifacts in dist/.
func (r release) chartArchive() string   { return "bucketkeeper-" + r.Version + ".tgz" }
func (r release) bundle() string         { return "bucketkeeper.yaml" }
func (r release) layoutDir() string      { return "oci" }
func (r release) operatorSBOM() string   { return "bucketkeeper_" + r.Version + ".spdx.json" }
func (r release) pluginSBOM() string     { return "kubectl-bucketkeeper_" + r.Tag + ".spdx.json" }
func (r release) binary(p string) string { return "bucketkeeper_" + strings.ReplaceAll(p, "/", "_") }
func (r release) imageArchive(p string) string {
	return "bucketkeeper_" + r.Version + "_" + strings.ReplaceAll(p, "/", "_") + ".oci.tar"
}
func (r release) pluginArchive(p string) string {
	return "kubectl-bucketkeeper_" + r.Tag + "_" + strings.ReplaceAll(p, "/", "_") + ".tar.gz"
}

// notices and modules are the licence step's outputs for a shipped binary.
func (r release) notices(name string) string { return filepath.Join(r.Bin, name+".notices") }
func (r release) modules(name string) string { return filepath.Join(r.Bin, name+".modules.json") }

// checkAndWriteNotices is `release licenses`: the licence check of every shipped
// binary's modules, and each binary's notices and module list for the package step.
func checkAndWriteNotices(r release) error {
	std, err := stdlibModule()
	if err != nil {
		return err
	}
	var problems []string
	for _, b := range shipped {
		mods, err := listModules(r.Root, b)
		if err != nil {
			return err
		}
		mods = append(mods, std)
		p, err := checkLicences(mods)
		if err != nil {
			return err
		}
		for _, line := range p {
			problems = append(problems, b.Name+": "+line)
		}
		if err := writeNotices(r.notices(b.Name), b.Name, mods); err != nil {
			return err
		}
		data, err := json.MarshalIndent(mods, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(r.modules(b.Name), data, 0o644); err != nil {
			return err
		}
		fmt.Printf("licences: %s links %d modules, each under a licence an Apache-2.0 binary may link\n", b.Name, len(mods))
	}
	if len(problems) > 0 {
		return fmt.Errorf("modules whose licence is unknown or incompatible with Apache-2.0:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// packageRelease is `release package`: every artifact of the release into r.Dist,
// each checked once written, then SHA256SUMS.
func packageRelease(r release) error {
	changelog, err := os.ReadFile(filepath.Join(r.Root, "CHANGELOG.md"))
	if err != nil {
		return err
	}
	if _, err := changelogSection(string(changelog), r.Version); err != nil {
		return err
	}
	licence, err := os.ReadFile(filepath.Join(r.Root, "LICENSE"))
	if err != nil {
		return err
	}
	operator, plugin := shipped[0], shipped[1]

	// The image, for each platform, from the binaries make built.
	blobs := blobStore{}
	spec := imageSpec{Ref: r.image(), Version: r.Version, Created: r.Created, Labels: map[string]string{
		"org.opencontainers.image.title":    "bucketkeeper",
		"org.opencontainers.image.source":   "https://" + ourModule,
		"org.opencontainers.image.version":  r.Version,
		"org.opencontainers.image.revision": r.Revision,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  r.Created.UTC().Format(time.RFC3339),
	}}
	notices, err := os.ReadFile(r.notices(operator.Name))
	if err != nil {
		return fmt.Errorf("%w (run `release licenses` first)", err)
	}
	var bins []shippedBinary
	var manifests []descriptor
	for _, p := range r.Platforms {
		data, err := os.ReadFile(filepath.Join(r.Bin, r.binary(p)))
		if err != nil {
			return err
		}
		b, err := checkReleaseBinary(operator.Name, p, data, r.Trimpath)
		if err != nil {
			return err
		}
		bins = append(bins, b)
		goos, goarch, _ := strings.Cut(p, "/")
		d, err := buildPlatformImage(blobs, spec, platform{OS: goos, Architecture: goarch}, []imageFile{
			{Path: imageBinary, Data: data, Mode: 0o755},
			{Path: "/licenses/LICENSE", Data: licence, Mode: 0o644},
			{Path: "/licenses/THIRD_PARTY_NOTICES", Data: notices, Mode: 0o644},
		})
		if err != nil {
			return err
		}
		manifests = append(manifests, d)
		one := d
		one.Annotations = refAnnotations(spec)
		if err := writeArchive(filepath.Join(r.Dist, r.imageArchive(p)), blobs, one, r.Created); err != nil {
			return err
		}
	}
	idx, err := json.Marshal(index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: manifests, Annotations: spec.Labels})
	if err != nil {
		return err
	}
	top := blobs.put(mediaIndex, idx)
	top.Annotations = refAnnotations(spec)
	if err := writeLayout(filepath.Join(r.Dist, r.layoutDir()), blobs, top); err != nil {
		return err
	}
	fmt.Printf("image: %s %s (%s)\n", r.image(), top.Digest, strings.Join(r.Platforms, ", "))

	// The chart and the bundle, each deploying that image and no other.
	chartPath, err := packageChart(filepath.Join(r.Root, "charts", "bucketkeeper"), r.Version, r.Repo, r.Dist)
	if err != nil {
		return err
	}
	c, objs, err := renderChart(chartPath, nil)
	if err != nil {
		return err
	}
	if c.Metadata.Version != r.Version || c.Metadata.AppVersion != r.Version {
		return fmt.Errorf("%s: version %s, appVersion %s, want %s", chartPath, c.Metadata.Version, c.Metadata.AppVersion, r.Version)
	}
	if err := onlyImage(r.chartArchive(), objs, r.image()); err != nil {
		return err
	}
	fmt.Printf("chart: %s (version and appVersion %s)\n", r.chartArchive(), r.Version)
	bundle, objs, err := renderBundle(r.Root, r.image())
	if err != nil {
		return err
	}
	if err := onlyImage(r.bundle(), objs, r.image()); err != nil {
		return err
	}
	header := fmt.Sprintf("# bucketkeeper %s: kubectl apply --server-side -f %s (docs/install.md)\n", r.Version, r.bundle())
	if err := os.WriteFile(filepath.Join(r.Dist, r.bundle()), append([]byte(header), bundle...), 0o644); err != nil {
		return err
	}
	fmt.Printf("bundle: %s (%d objects)\n", r.bundle(), len(objs))

	// The SBOMs, from the binaries' own build information; every module they list was
	// licence-checked.
	var pluginBins []shippedBinary
	for _, p := range r.PluginPlatforms {
		b, err := pluginBinary(filepath.Join(r.Dist, r.pluginArchive(p)), p, r.Trimpath)
		if err != nil {
			return err
		}
		pluginBins = append(pluginBins, b)
	}
	for _, s := range []struct {
		name, file string
		bins       []shippedBinary
	}{{operator.Name, r.operatorSBOM(), bins}, {plugin.Name, r.pluginSBOM(), pluginBins}} {
		licences, err := checkedLicences(r.modules(s.name), s.bins)
		if err != nil {
			return err
		}
		doc, err := writeSBOM(s.name, r.Version, "https://"+ourModule+"/releases/download/"+r.Tag+"/"+s.file, r.Created, s.bins, licences)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(r.Dist, s.file), doc, 0o644); err != nil {
			return err
		}
		fmt.Printf("sbom: %s\n", s.file)
	}

	lines, err := writeSums(r.Dist)
	if err != nil {
		return err
	}
	fmt.Printf("%s:\n  %s\n", sumsFile, strings.Join(lines, "\n  "))
	return nil
}

// checkReleaseBinary reads a binary's build information and fails unless it was built
// as a release is: static (CGO_ENABLED=0, no ELF interpreter), for its platform,
// stripped, and with -trimpath when trimpath says so.
func checkReleaseBinary(name, p string, data []byte, trimpath bool) (shippedBinary, error) {
	b, err := readBinary(name, p, data)
	if err != nil {
		return b, err
	}
	if (setting(b.Info, "-trimpath") == "true") != trimpath || setting(b.Info, "CGO_ENABLED") != "0" {
		return b, fmt.Errorf("%s %s was not built as a release (%s): want CGO_ENABLED=0 and -trimpath=%t", name, p, buildFlags(b.Info), trimpath)
	}
	// Go records -ldflags only without -trimpath (go.dev/issue/52372): the sections
	// say whether the binary was stripped, where the flags are not there to say it.
	ldflags, recorded := "", false
	for _, s := range b.Info.Settings {
		if s.Key == "-ldflags" {
			ldflags, recorded = s.Value, true
		}
	}
	if recorded && !strings.Contains(ldflags, "-s -w") {
		return b, fmt.Errorf("%s %s was not built as a release (-ldflags=%q): want -ldflags=\"-s -w\"", name, p, ldflags)
	}
	if err := checkStripped(p, data); err != nil {
		return b, fmt.Errorf("%s %s: %w", name, p, err)
	}
	return b, nil
}

// checkStripped fails unless a binary holds no DWARF (-w) and, where the format tells,
// no symbol table (-s); a linux binary must also be static, for its architecture.
func checkStripped(p string, data []byte) error {
	goos, goarch, _ := strings.Cut(p, "/")
	var sections []string
	switch goos {
	case "linux":
		f, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			return err
		}
		if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch]; f.Machine != want {
			return fmt.Errorf("an ELF binary for %v", f.Machine)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				return fmt.Errorf("dynamically linked: the image has no libc")
			}
		}
		for _, s := range f.Sections {
			sections = append(sections, s.Name)
		}
		if slices.Contains(sections, ".symtab") {
			return fmt.Errorf("not stripped: it has a symbol table (want -ldflags=\"-s -w\")")
		}
	case "darwin":
		f, err := macho.NewFile(bytes.NewReader(data))
		if err != nil {
			return err
		}
		for _, s := range f.Sections {
			sections = append(sections, s.Name)
		}
	case "windows":
		f, err := pe.NewFile(bytes.NewReader(data))
		if err != nil {
			return err
		}
		if len(f.Symbols) > 0 {
			return fmt.Errorf("not stripped: it has a symbol table (want -ldflags=\"-s -w\")")
		}
		for _, s := range f.Sections {
			sections = append(sections, s.Name)
		}
	}
	for _, s := range sections {
		if strings.Contains(s, "debug_") {
			return fmt.Errorf("not stripped: it has DWARF (%s; want -ldflags=\"-s -w\")", s)
		}
	}
	return nil
}

// pluginBinary reads the kubectl plugin's binary out of its krew archive, which must
// also hold LICENSE and THIRD_PARTY_NOTICES.
func pluginBinary(archive, p string, trimpath bool) (shippedBinary, error) {
	f, err := os.Open(archive)
	if err != nil {
		return shippedBinary{}, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return shippedBinary{}, fmt.Errorf("%s: %w", archive, err)
	}
	tr := tar.NewReader(zr)
	var bin []byte
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return shippedBinary{}, fmt.Errorf("%s: %w", archive, err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		names = append(names, name)
		if name == "kubectl-bucketkeeper" || name == "kubectl-bucketkeeper.exe" {
			if bin, err = io.ReadAll(tr); err != nil {
				return shippedBinary{}, err
			}
		}
	}
	for _, want := range []string{"LICENSE", "THIRD_PARTY_NOTICES"} {
		if !slices.Contains(names, want) {
			return shippedBinary{}, fmt.Errorf("%s holds no %s (it holds %v)", archive, want, names)
		}
	}
	if bin == nil {
		return shippedBinary{}, fmt.Errorf("%s holds no kubectl-bucketkeeper binary (it holds %v)", archive, names)
	}
	return checkReleaseBinary("kubectl-bucketkeeper", p, bin, trimpath)
}

// checkedLicences returns the licences the licence step found, by module path, and
// fails if a binary links a module (or a version of one) that step did not check.
func checkedLicences(modulesJSON string, bins []shippedBinary) (map[string][]string, error) {
	data, err := os.ReadFile(modulesJSON)
	if err != nil {
		return nil, fmt.Errorf("%w (run `release licenses` first)", err)
	}
	var mods []module
	if err := json.Unmarshal(data, &mods); err != nil {
		return nil, err
	}
	checked := map[string]string{}
	licences := map[string][]string{}
	for _, m := range mods {
		checked[m.Path], licences[m.Path] = m.Version, m.Licences
	}
	for _, b := range bins {
		for _, d := range b.Info.Deps {
			m := d
			if d.Replace != nil {
				m = d.Replace
			}
			if v, ok := checked[d.Path]; !ok || (v != m.Version && !strings.HasPrefix(d.Path, ourModule)) {
				return nil, fmt.Errorf("%s %s links %s %s, which the licence check did not see", b.Name, b.Platform, d.Path, m.Version)
			}
		}
	}
	return licences, nil
}
