package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Openings of licence texts, as modules' LICENSE files hold them.
const (
	mitText = `The MIT License (MIT)

Copyright (c) 2014 Someone

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.`
	bsd3Text = `Copyright (c) 2009 The Go Authors. All rights reserved.

Redistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are
met:

   * Redistributions of source code must retain the above copyright
notice, this list of conditions and the following disclaimer.
   * Neither the name of Google LLC nor the names of its
contributors may be used to endorse or promote products derived from
this software without specific prior written permission.`
	bsd2Text = `Copyright (c) 2015, Dave Cheney <dave@cheney.net>
All rights reserved.

Redistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are met:

* Redistributions of source code must retain the above copyright notice, this
  list of conditions and the following disclaimer.

* Redistributions in binary form must reproduce the above copyright notice,
  this list of conditions and the following disclaimer in the documentation
  and/or other materials provided with the distribution.`
	bsd4Text = `Redistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are met:
3. All advertising materials mentioning features or use of this software
   must display the following acknowledgement.
4. Neither the name of the University nor the names of its contributors
   may be used to endorse or promote products derived from this software.`
	iscText = `ISC License

Copyright (c) 2012-2016 Dave Collins <dave@davec.name>

Permission to use, copy, modify, and/or distribute this software for any
purpose with or without fee is hereby granted, provided that the above
copyright notice and this permission notice appear in all copies.`
	mplText = `Mozilla Public License Version 2.0
==================================

1.12. "Secondary License"
    means either the GNU General Public License, Version 2.0, the GNU Lesser
    General Public License, Version 2.1, the GNU Affero General Public
    License, Version 3.0, or any later versions of those licenses.`
	apacheHeader = `Copyright 2017 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.`
	gpl3Text = `                    GNU GENERAL PUBLIC LICENSE
                       Version 3, 29 June 2007

 Copyright (C) 2007 Free Software Foundation, Inc. <https://fsf.org/>`
	agplText = `                    GNU AFFERO GENERAL PUBLIC LICENSE
                       Version 3, 19 November 2007`
	lgplText = `                  GNU LESSER GENERAL PUBLIC LICENSE
                       Version 2.1, February 1999`
	gplNotice = `// This program is free software: you can redistribute it and/or modify
// it under the terms of the GNU General Public License as published by
// the Free Software Foundation, either version 3 of the License, or
// (at your option) any later version.`
)

func TestClassify(t *testing.T) {
	apache, err := os.ReadFile(filepath.Join(repoRoot(t), "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		text string
		want []string
	}{
		"Apache-2.0, full text":        {string(apache), []string{"Apache-2.0"}},
		"Apache-2.0, notice":           {apacheHeader, []string{"Apache-2.0"}},
		"MIT":                          {mitText, []string{"MIT"}},
		"BSD-3-Clause":                 {bsd3Text, []string{"BSD-3-Clause"}},
		"BSD-2-Clause":                 {bsd2Text, []string{"BSD-2-Clause"}},
		"BSD-4-Clause":                 {bsd4Text, []string{"BSD-4-Clause"}},
		"ISC":                          {iscText, []string{"ISC"}},
		"ISC without and/or":           {strings.Replace(iscText, "and/or", "and", 1), []string{"ISC"}},
		"MPL-2.0, naming the GPL":      {mplText, []string{"MPL-2.0"}},
		"GPL-3.0":                      {gpl3Text, []string{"GPL-3.0"}},
		"AGPL-3.0":                     {agplText, []string{"AGPL-3.0"}},
		"LGPL-2.1":                     {lgplText, []string{"LGPL"}},
		"a GPL notice":                 {gplNotice, []string{"GPL"}},
		"BSD-3 and MIT in one file":    {bsd3Text + "\n\n" + mitText, []string{"BSD-3-Clause", "MIT"}},
		"BSD-2 then BSD-3":             {bsd2Text + "\n\n" + bsd3Text, []string{"BSD-2-Clause", "BSD-3-Clause"}},
		"MIT re-wrapped, in a comment": {"// " + strings.ReplaceAll(mitText, "\n", "\n// "), []string{"MIT"}},
		"no licence":                   {"Copyright 2020 Someone. All rights reserved.", nil},
		"MIT named, not granted":       {"This project is MIT licensed, see the website.", nil},
	} {
		t.Run(name, func(t *testing.T) {
			if got := classify(c.text); !slices.Equal(got, c.want) {
				t.Errorf("classify = %v, want %v", got, c.want)
			}
		})
	}
}

// TestCheckLicencesNamesEveryProblem: a module with no licence file, one with a licence
// the classifier does not know, one under the GPL and one whose file bundles the GPL
// with MIT are each named, with why; MIT, MPL-2.0 and a module with a NOTICE beside its
// licence pass.
func TestCheckLicencesNamesEveryProblem(t *testing.T) {
	dir := t.TempDir()
	mod := func(path string, files map[string]string) module {
		d := filepath.Join(dir, strings.ReplaceAll(path, "/", "_"))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(d, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return module{Path: path, Version: "v1.0.0", Dir: d}
	}
	mods := []module{
		mod("example.com/mit", map[string]string{"LICENSE": mitText}),
		mod("example.com/mpl", map[string]string{"LICENSE": mplText}),
		mod("example.com/apache-notice", map[string]string{"LICENSE.txt": apacheHeader, "NOTICE": "Example, Inc."}),
		mod("example.com/none", map[string]string{"README.md": "MIT licensed"}),
		mod("example.com/unknown", map[string]string{"LICENSE": "All rights reserved."}),
		mod("example.com/gpl", map[string]string{"COPYING": gpl3Text}),
		mod("example.com/mixed", map[string]string{"LICENSE-MIT": mitText, "LICENSE-GPL": gplNotice}),
	}
	problems, err := checkLicences(mods)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"example.com/none":    "no licence file",
		"example.com/unknown": "unknown licence in LICENSE",
		"example.com/gpl":     "GPL-3.0, which an Apache-2.0 binary may not link",
		"example.com/mixed":   "GPL, which an Apache-2.0 binary may not link (found [GPL MIT]",
	}
	if len(problems) != len(want) {
		t.Errorf("%d problems, want %d:\n%s", len(problems), len(want), strings.Join(problems, "\n"))
	}
	for path, why := range want {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, path+" ") && strings.Contains(p, why) }) {
			t.Errorf("no problem names %s with %q:\n%s", path, why, strings.Join(problems, "\n"))
		}
	}
	if got := mods[2].Files; !slices.Equal(got, []string{"LICENSE.txt", "NOTICE"}) {
		t.Errorf("files of a module with a NOTICE: %v", got)
	}
}

// TestShippedModulesHaveCompatibleLicences: every module linked into the operator's
// binary and the kubectl plugin's, on every platform each is released for, and the
// standard library, carry licences compatible with shipping them in an Apache-2.0
// binary; the repository's LICENSE is Apache-2.0 itself, the text Kubernetes' modules
// carry, byte for byte.
func TestShippedModulesHaveCompatibleLicences(t *testing.T) {
	root := repoRoot(t)
	for _, b := range shipped {
		t.Run(b.Name, func(t *testing.T) {
			mods, err := listModules(root, b)
			if err != nil {
				t.Fatal(err)
			}
			std, err := stdlibModule()
			if err != nil {
				t.Fatal(err)
			}
			mods = append(mods, std)
			problems, err := checkLicences(mods)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Error(p)
			}
			t.Logf("%d modules checked", len(mods))
		})
	}
	ours, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	k8s, err := apacheOfKubernetes(root)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, k8s) {
		t.Error("LICENSE differs from the Apache-2.0 text of Kubernetes' modules")
	}
}

// repoRoot is the repository's root, two directories up.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}
