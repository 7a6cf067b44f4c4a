// Command vettool is go vet's own analyzer suite (cmd/vet's list, from the
// golang.org/x/tools version the Go toolchain vendors for cmd/vet) for `go vet -vettool`,
// with one difference: it computes no facts for the packages of other modules than ours.
//
// go vet runs its tool on every package a vetted package imports, in a facts-only mode:
// each dependency is parsed and type-checked from source again, so that an analyzer can
// learn, say, which of its functions wrap fmt.Sprintf. For make test that was the
// three-thousand-odd packages our modules import: 441 CPU seconds of vet processes in an
// empty cache's run on two cores, for facts no diagnostic of ours used, as our code calls
// no printf-like function of a third-party module. Vetting the operator's module on a
// filled build cache took 177 CPU seconds with those facts and 72 without. The standard
// library's packages and ours are still analysed in full, so calls to fmt, testing and log
// functions, and to our own wrappers, are checked as go vet checks them.
package main

import (
	"encoding/json"
	"os"
	"strings"

	"golang.org/x/tools/go/analysis/passes/appends"
	"golang.org/x/tools/go/analysis/passes/asmdecl"
	"golang.org/x/tools/go/analysis/passes/assign"
	"golang.org/x/tools/go/analysis/passes/atomic"
	"golang.org/x/tools/go/analysis/passes/bools"
	"golang.org/x/tools/go/analysis/passes/buildtag"
	"golang.org/x/tools/go/analysis/passes/cgocall"
	"golang.org/x/tools/go/analysis/passes/composite"
	"golang.org/x/tools/go/analysis/passes/copylock"
	"golang.org/x/tools/go/analysis/passes/defers"
	"golang.org/x/tools/go/analysis/passes/directive"
	"golang.org/x/tools/go/analysis/passes/errorsas"
	"golang.org/x/tools/go/analysis/passes/framepointer"
	"golang.org/x/tools/go/analysis/passes/hostport"
	"golang.org/x/tools/go/analysis/passes/httpresponse"
	"golang.org/x/tools/go/analysis/passes/ifaceassert"
	"golang.org/x/tools/go/analysis/passes/loopclosure"
	"golang.org/x/tools/go/analysis/passes/lostcancel"
	"golang.org/x/tools/go/analysis/passes/nilfunc"
	"golang.org/x/tools/go/analysis/passes/printf"
	"golang.org/x/tools/go/analysis/passes/shift"
	"golang.org/x/tools/go/analysis/passes/sigchanyzer"
	"golang.org/x/tools/go/analysis/passes/slog"
	"golang.org/x/tools/go/analysis/passes/stdmethods"
	"golang.org/x/tools/go/analysis/passes/stdversion"
	"golang.org/x/tools/go/analysis/passes/stringintconv"
	"golang.org/x/tools/go/analysis/passes/structtag"
	"golang.org/x/tools/go/analysis/passes/testinggoroutine"
	"golang.org/x/tools/go/analysis/passes/tests"
	"golang.org/x/tools/go/analysis/passes/timeformat"
	"golang.org/x/tools/go/analysis/passes/unmarshal"
	"golang.org/x/tools/go/analysis/passes/unreachable"
	"golang.org/x/tools/go/analysis/passes/unsafeptr"
	"golang.org/x/tools/go/analysis/passes/unusedresult"
	"golang.org/x/tools/go/analysis/passes/waitgroup"
	"golang.org/x/tools/go/analysis/unitchecker"
)

// ourModules is the operator's module path, which our nested modules' paths extend.
const ourModules = "github.com/bucketkeeper/bucketkeeper"

func main() {
	if cfg := os.Args[len(os.Args)-1]; len(os.Args) > 1 && strings.HasSuffix(cfg, ".cfg") && skipFacts(cfg) {
		os.Exit(0)
	}
	unitchecker.Main(
		appends.Analyzer, asmdecl.Analyzer, assign.Analyzer, atomic.Analyzer, bools.Analyzer,
		buildtag.Analyzer, cgocall.Analyzer, composite.Analyzer, copylock.Analyzer,
		defers.Analyzer, directive.Analyzer, errorsas.Analyzer, framepointer.Analyzer,
		httpresponse.Analyzer, hostport.Analyzer, ifaceassert.Analyzer, loopclosure.Analyzer,
		lostcancel.Analyzer, nilfunc.Analyzer, printf.Analyzer, shift.Analyzer,
		sigchanyzer.Analyzer, slog.Analyzer, stdmethods.Analyzer, stdversion.Analyzer,
		stringintconv.Analyzer, structtag.Analyzer, tests.Analyzer, testinggoroutine.Analyzer,
		timeformat.Analyzer, unmarshal.Analyzer, unreachable.Analyzer, unsafeptr.Analyzer,
		unusedresult.Analyzer, waitgroup.Analyzer,
	)
}

// skipFacts reports whether the package go vet describes in the config file cfgPath is
// only asked for its facts and belongs to another module than ours (the standard
// library has no module path); it then writes the empty facts file go vet expects.
// On any doubt it reports false, and the package is analysed as go vet would.
func skipFacts(cfgPath string) bool {
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return false
	}
	var cfg struct {
		ModulePath string
		VetxOnly   bool
		VetxOutput string
	}
	if json.Unmarshal(data, &cfg) != nil || !cfg.VetxOnly || cfg.VetxOutput == "" ||
		cfg.ModulePath == "" || cfg.ModulePath == ourModules || strings.HasPrefix(cfg.ModulePath, ourModules+"/") {
		return false
	}
	return os.WriteFile(cfg.VetxOutput, nil, 0o666) == nil
}
