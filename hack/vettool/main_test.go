package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestSkipFacts: only a facts-only run on another module's package is skipped, and it
// leaves the empty facts file go vet reads back; the standard library, our modules and
// every package vetted for diagnostics are analysed.
func TestSkipFacts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		modulePath string
		vetxOnly   bool
		skip       bool
	}{
		{"dependency for facts", "k8s.io/client-go", true, true},
		{"standard library for facts", "", true, false},
		{"our module for facts", "github.com/bucketkeeper/bucketkeeper", true, false},
		{"our nested module for facts", "github.com/bucketkeeper/bucketkeeper/test/manifests", true, false},
		{"a look-alike module for facts", "github.com/bucketkeeper/bucketkeeperx", true, true},
		{"dependency vetted for diagnostics", "k8s.io/client-go", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			vetx := filepath.Join(dir, "vet.out")
			cfg := filepath.Join(dir, "vet.cfg")
			data, err := json.Marshal(map[string]any{"ModulePath": tc.modulePath, "VetxOnly": tc.vetxOnly, "VetxOutput": vetx})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cfg, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if got := skipFacts(cfg); got != tc.skip {
				t.Fatalf("skipFacts = %v, want %v", got, tc.skip)
			}
			info, err := os.Stat(vetx)
			switch {
			case tc.skip && (err != nil || info.Size() != 0):
				t.Errorf("skipped, but the facts file is %v (%v), want an empty file", info, err)
			case !tc.skip && err == nil:
				t.Errorf("not skipped, but a facts file was written")
			}
		})
	}
	if skipFacts(filepath.Join(t.TempDir(), "missing.cfg")) {
		t.Error("a config that cannot be read was skipped")
	}
}
