package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// writeNotices writes the licence terms and NOTICE files of every module other than
// ours that a binary links, as the MIT and BSD licences ask of a binary's
// distribution ("the above copyright notice ... shall be included") and Apache-2.0
// asks of NOTICE files. Each module names where its source is: MPL-2.0 asks that the
// source of the files it covers stays available, which the Go module proxy does.
// readLicences must have filled mods.
func writeNotices(path, binary string, mods []module) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Third-party software in %s\n\n", binary)
	fmt.Fprintf(&b, "%s is licensed under the Apache License, Version 2.0 (LICENSE). It links the\n", binary)
	b.WriteString("modules below, each under the licence terms that follow its name.\n")
	for _, m := range mods {
		if m.Ours() {
			continue
		}
		fmt.Fprintf(&b, "\n%s\n%s %s\n", strings.Repeat("=", 79), m.Path, m.Version)
		fmt.Fprintf(&b, "Licence: %s\n", strings.Join(m.Licences, " AND "))
		if src := sourceURL(m); src != "" {
			fmt.Fprintf(&b, "Source: %s\n", src)
		}
		for _, f := range m.Files {
			data, err := os.ReadFile(filepath.Join(m.Dir, f))
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "\n--- %s ---\n\n%s", f, data)
			if !bytes.HasSuffix(data, []byte("\n")) {
				b.WriteString("\n")
			}
		}
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// sourceURL is where a module's source can be downloaded: its zip on the Go module
// proxy, or the Go distribution for the standard library.
func sourceURL(m module) string {
	switch {
	case m.Path == "stdlib":
		return "https://go.dev/dl/" + m.Version + ".src.tar.gz"
	case m.Version == "":
		return ""
	}
	return "https://proxy.golang.org/" + escapePath(m.Path) + "/@v/" + escapePath(m.Version) + ".zip"
}

// escapePath escapes a module path or version as the module proxy's URLs do: each
// upper-case letter becomes '!' and its lower case.
func escapePath(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
