package metrics

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Family is one metric family the operator registers: its name, type, help and
// variable labels, as docs/operations.md's table of metrics shows it (test/docs writes
// that table from Families, and fails when it differs).
type Family struct {
	Name   string
	Type   string // counter, gauge or histogram
	Help   string
	Labels []string
}

// descRE reads a descriptor's String(): client_golang exposes a Desc's name, help and
// variable labels in no other way. TestFamilies pins the format it reads.
var descRE = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), unit: "(?:[^"\\]|\\.)*", constLabels: \{[^}]*\}, variableLabels: \{([^}]*)\}\}$`)

// Families returns every metric family Register adds, by name.
func Families() ([]Family, error) {
	var out []Family
	for _, c := range collectors() {
		typ, err := typeOf(c)
		if err != nil {
			return nil, err
		}
		ch := make(chan *prometheus.Desc, 4)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			f, err := familyOf(d.String(), typ)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b Family) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// typeOf is the exposition type of a collector of ours.
func typeOf(c prometheus.Collector) (string, error) {
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter", nil
	case *prometheus.GaugeVec, *bucketGauge:
		return "gauge", nil
	case *prometheus.HistogramVec, prometheus.Histogram:
		return "histogram", nil
	}
	return "", fmt.Errorf("metrics: collector %T of unknown type: add it to typeOf", c)
}

func familyOf(desc, typ string) (Family, error) {
	m := descRE.FindStringSubmatch(desc)
	if m == nil {
		return Family{}, fmt.Errorf("metrics: cannot read descriptor %s", desc)
	}
	name, err := strconv.Unquote(m[1])
	if err != nil {
		return Family{}, err
	}
	help, err := strconv.Unquote(m[2])
	if err != nil {
		return Family{}, err
	}
	var labels []string
	if m[3] != "" {
		labels = strings.Split(m[3], ",")
	}
	return Family{Name: name, Type: typ, Help: help, Labels: labels}, nil
}
