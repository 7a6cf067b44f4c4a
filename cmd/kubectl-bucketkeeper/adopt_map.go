package main

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// namespaceRule maps the buckets whose name matches pattern to a namespace: a glob
// (path.Match: *, ?, [...]) when the pattern has one of those characters, else a
// prefix of the bucket's name.
type namespaceRule struct {
	pattern   string
	namespace string
	// from says where the rule was given, for errors: "--namespace-map" or file:line.
	from string
}

func (r namespaceRule) matches(bucket string) bool {
	if strings.ContainsAny(r.pattern, "*?[") {
		ok, _ := path.Match(r.pattern, bucket) // the pattern was checked when parsed
		return ok
	}
	return strings.HasPrefix(bucket, r.pattern)
}

// namespaceMap decides which namespace an adopted bucket's claim goes to: the first
// rule that matches, else the default namespace, else none (the bucket is skipped and
// said so: a namespace is never guessed).
type namespaceMap struct {
	rules       []namespaceRule
	defaultNS   string
	defaultFrom string
}

// namespaceFor returns the namespace of bucket and the rule that chose it ("" when
// none did).
func (m *namespaceMap) namespaceFor(bucket string) (namespace, rule string) {
	for _, r := range m.rules {
		if r.matches(bucket) {
			return r.namespace, r.pattern + "=" + r.namespace
		}
	}
	if m.defaultNS != "" {
		return m.defaultNS, "--default-namespace"
	}
	return "", ""
}

func (m *namespaceMap) empty() bool { return len(m.rules) == 0 && m.defaultNS == "" }

// parseNamespaceRules reads "pattern=namespace" rules separated by commas (the flag)
// or by lines (the file, where blank lines and lines starting with # are skipped).
func parseNamespaceRules(text, from string, byLine bool) ([]namespaceRule, error) {
	var items []struct{ text, where string }
	if byLine {
		sc := bufio.NewScanner(bytes.NewReader([]byte(text)))
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			items = append(items, struct{ text, where string }{line, fmt.Sprintf("%s:%d", from, n)})
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", from, err)
		}
	} else {
		for _, item := range strings.Split(text, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, struct{ text, where string }{item, from})
			}
		}
	}
	rules := make([]namespaceRule, 0, len(items))
	for _, it := range items {
		pattern, ns, ok := strings.Cut(it.text, "=")
		pattern, ns = strings.TrimSpace(pattern), strings.TrimSpace(ns)
		if !ok || pattern == "" || ns == "" {
			return nil, fmt.Errorf("%s: %q: want PREFIX=NAMESPACE or GLOB=NAMESPACE", it.where, it.text)
		}
		if _, err := path.Match(pattern, ""); err != nil {
			return nil, fmt.Errorf("%s: pattern %q: %w", it.where, pattern, err)
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("%s: namespace %q: %s", it.where, ns, strings.Join(errs, "; "))
		}
		rules = append(rules, namespaceRule{pattern: pattern, namespace: ns, from: it.where})
	}
	return rules, nil
}
