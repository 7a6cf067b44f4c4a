package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestWriteSums: SHA256SUMS names every file at the top of the directory but itself,
// sorted, in sha256sum's format; not what is below it.
func TestWriteSums(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"b.tgz": "chart", "a.yaml": "bundle", sumsFile: "stale"}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "oci"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "oci", "index.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := writeSums(dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, sumsFile))
	if err != nil {
		t.Fatal(err)
	}
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	want := []string{sum("bundle") + "  a.yaml", sum("chart") + "  b.tgz", ""}
	if lines := strings.Split(string(got), "\n"); !slices.Equal(lines, want) {
		t.Errorf("SHA256SUMS:\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}
