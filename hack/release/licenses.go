package main

import (
	"regexp"
	"slices"
	"strings"
)

// A licence the classifier knows: its SPDX identifier, whether a module under it may be
// linked into an Apache-2.0 binary that we distribute, and the phrases (normalized,
// see normalize) of which one must occur in a licence file for it to be that licence.
type licence struct {
	id         string
	compatible bool
	phrases    []string
}

// licences are told apart by phrases of their own text, not by file names or by a
// README's claim: a LICENSE file that says MIT but holds the GPL is the GPL. Every phrase
// is normalized (lower case, every run of other characters than letters and digits one
// space), so line breaks, comment markers and punctuation do not matter.
//
// Compatible are the permissive licences (Apache-2.0, MIT, BSD-2/3-Clause, ISC) and
// MPL-2.0, which covers only its own files: linking an unmodified MPL module into a
// binary under another licence is what it allows, as long as its source stays available
// (the module proxy keeps it, and the notices name it). The GNU licences are not: the
// GPL and AGPL would put the whole binary under them, and the LGPL asks that users can
// relink it against another version of the library, which a static Go binary does not
// allow. Nor are the source-available licences that restrict use (SSPL, BUSL, the
// Commons Clause), and the four-clause BSD, whose advertising clause the ASF does not
// accept. The GNU texts are recognized by their titles with dates and their notice,
// not by their names alone: MPL-2.0 names the GPL as a secondary licence.
var licences = []licence{
	{"Apache-2.0", true, []string{
		"apache license version 2 0 january 2004",
		"licensed under the apache license version 2 0",
	}},
	{"MIT", true, []string{
		"permission is hereby granted free of charge to any person obtaining a copy",
	}},
	{"BSD-3-Clause", true, nil}, // by bsdClauses below
	{"BSD-2-Clause", true, nil},
	{"BSD-4-Clause", false, nil},
	{"ISC", true, []string{
		"permission to use copy modify and or distribute this software for any purpose with or without fee is hereby granted",
		"permission to use copy modify and distribute this software for any purpose with or without fee is hereby granted",
	}},
	{"MPL-2.0", true, []string{
		"mozilla public license version 2 0",
		"mozilla public license v 2 0",
	}},
	{"AGPL-3.0", false, []string{
		"gnu affero general public license version 3 19 november 2007",
		"under the terms of the gnu affero general public license",
	}},
	{"GPL-3.0", false, []string{
		"gnu general public license version 3 29 june 2007",
	}},
	{"GPL-2.0", false, []string{
		"gnu general public license version 2 june 1991",
	}},
	{"GPL", false, []string{
		"under the terms of the gnu general public license",
	}},
	{"LGPL", false, []string{
		"gnu lesser general public license version 3 29 june 2007",
		"gnu lesser general public license version 2 1 february 1999",
		"gnu library general public license version 2 june 1991",
		"under the terms of the gnu lesser general public license",
		"under the terms of the gnu library general public license",
	}},
	{"SSPL-1.0", false, []string{"server side public license"}},
	{"BUSL-1.1", false, []string{"business source license"}},
	{"Commons-Clause", false, []string{"commons clause license condition"}},
}

// The BSD licences share their opening; the clauses after it tell them apart.
const (
	bsdOpening     = "redistribution and use in source and binary forms with or without modification are permitted provided that the following conditions are met"
	bsdEndorsement = "to endorse or promote products derived from this software"
	bsdAdvertising = "all advertising materials mentioning features or use of this software"
)

var nonAlnum = regexp.MustCompile(`[^a-z0-9]+`)

// normalize lowers text and turns every run of characters other than ASCII letters
// and digits into one space.
func normalize(text string) string {
	return " " + strings.TrimSpace(nonAlnum.ReplaceAllString(strings.ToLower(text), " ")) + " "
}

// classify returns the SPDX identifiers of every licence the text holds, sorted: a
// file may hold several (a module's own licence and those of code it vendored, as
// klauspost/compress's does). None means the text is no licence the classifier knows.
func classify(text string) []string {
	t := normalize(text)
	var ids []string
	for _, l := range licences {
		for _, p := range l.phrases {
			if strings.Contains(t, " "+p+" ") {
				ids = append(ids, l.id)
				break
			}
		}
	}
	// Each BSD text: what follows one opening, up to the next.
	parts := strings.Split(t, " "+bsdOpening+" ")
	for _, clauses := range parts[1:] {
		switch {
		case strings.Contains(clauses, bsdAdvertising):
			ids = append(ids, "BSD-4-Clause")
		case strings.Contains(clauses, bsdEndorsement):
			ids = append(ids, "BSD-3-Clause")
		default:
			ids = append(ids, "BSD-2-Clause")
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// compatible reports whether a module under every one of ids may be linked into
// bucketkeeper's binaries, and returns those that may not. A module whose files hold
// several licences is taken to be under all of them (the conservative reading: a file
// holding a module's licence and a vendored part's covers both parts).
func compatible(ids []string) (ok bool, incompatible []string) {
	for _, id := range ids {
		i := slices.IndexFunc(licences, func(l licence) bool { return l.id == id })
		if i < 0 || !licences[i].compatible {
			incompatible = append(incompatible, id)
		}
	}
	return len(ids) > 0 && len(incompatible) == 0, incompatible
}
