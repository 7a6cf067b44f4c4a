package main

import (
	"fmt"
	"regexp"
	"strings"
)

// changelogSection returns the body of CHANGELOG.md's section of version (Keep a
// Changelog: "## [0.1.0] - 2026-12-07"), the GitHub release's text. A version without
// a dated section of its own is not released.
func changelogSection(changelog, version string) (string, error) {
	heading := regexp.MustCompile(`(?m)^## \[` + regexp.QuoteMeta(version) + `\] - \d{4}-\d{2}-\d{2}[ \t]*$`)
	loc := heading.FindStringIndex(changelog)
	if loc == nil {
		return "", fmt.Errorf("CHANGELOG.md has no section \"## [%s] - YYYY-MM-DD\": write one before releasing %s", version, version)
	}
	body := changelog[loc[1]:]
	if next := regexp.MustCompile(`(?m)^## `).FindStringIndex(body); next != nil {
		body = body[:next[0]]
	}
	// The link definitions at the end of the file are not part of the last section.
	if links := regexp.MustCompile(`(?m)^\[[^\]]+\]: `).FindStringIndex(body); links != nil {
		body = body[:links[0]]
	}
	body = strings.TrimSpace(body)
	if body == "" {
		return "", fmt.Errorf("CHANGELOG.md's section of %s is empty", version)
	}
	return body + "\n", nil
}

// semver matches a release's version: MAJOR.MINOR.PATCH with an optional pre-release.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)

// versionOfTag returns the version a release tag names: v0.1.0 names 0.1.0.
func versionOfTag(tag string) (string, error) {
	v, ok := strings.CutPrefix(tag, "v")
	if !ok || !semver.MatchString(v) {
		return "", fmt.Errorf("release tag %q is not vMAJOR.MINOR.PATCH[-PRERELEASE]", tag)
	}
	return v, nil
}
