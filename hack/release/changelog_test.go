package main

import (
	"strings"
	"testing"
)

const changelogSample = `# Changelog

## [Unreleased]

### Added
- Something new.

## [0.2.0] - 2027-01-15

### Fixed
- A fix.

## [0.1.0] - 2026-12-07

### Added
- Everything.

[Unreleased]: https://example.com/compare/v0.2.0...HEAD
[0.2.0]: https://example.com/compare/v0.1.0...v0.2.0
`

func TestChangelogSection(t *testing.T) {
	for version, want := range map[string]string{
		"0.2.0": "### Fixed\n- A fix.\n",
		"0.1.0": "### Added\n- Everything.\n",
	} {
		got, err := changelogSection(changelogSample, version)
		if err != nil || got != want {
			t.Errorf("section %s: %q, %v; want %q", version, got, err, want)
		}
	}
	for _, version := range []string{"0.3.0", "Unreleased", "0.1"} {
		if _, err := changelogSection(changelogSample, version); err == nil || !strings.Contains(err.Error(), "has no section") {
			t.Errorf("section %s: %v, want an error saying there is none", version, err)
		}
	}
}

func TestVersionOfTag(t *testing.T) {
	for tag, want := range map[string]string{"v0.1.0": "0.1.0", "v1.20.3": "1.20.3", "v0.2.0-rc.1": "0.2.0-rc.1"} {
		if got, err := versionOfTag(tag); got != want || err != nil {
			t.Errorf("%s: %q, %v", tag, got, err)
		}
	}
	for _, tag := range []string{"0.1.0", "v0.1", "v01.2.3", "vlatest", "v0.1.0/x"} {
		if _, err := versionOfTag(tag); err == nil {
			t.Errorf("%s: no error", tag)
		}
	}
}
