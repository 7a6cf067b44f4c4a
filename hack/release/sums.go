package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// sumsFile is the checksum file of a release: sha256sum's format, every artifact.
const sumsFile = "SHA256SUMS"

// writeSums writes dir/SHA256SUMS for every regular file at dir's top level but itself
// (`sha256sum -c SHA256SUMS` checks them), sorted by name, and returns its lines.
func writeSums(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == sumsFile {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, err
		}
		lines = append(lines, fmt.Sprintf("%s  %s", hex.EncodeToString(h.Sum(nil)), e.Name()))
	}
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(a[66:], b[66:]) })
	return lines, os.WriteFile(filepath.Join(dir, sumsFile), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}
