package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"
)

// table is what a verb prints as text: a header and rows whose first cell may carry a
// tree drawing. Columns are padded from the plain text, and colour is added after, so
// the escape codes never shift a column.
type table struct {
	header []string
	rows   []row
	// status is the column a row's tone colours.
	status int
}

type row struct {
	cells []string
	// tone colours the row's status cell: a condition status ("True", "False",
	// "Unknown") or "missing".
	tone string
}

func (t *table) add(tone string, cells ...string) {
	t.rows = append(t.rows, row{cells: cells, tone: tone})
}

func (t *table) print(w io.Writer, colour bool) error {
	widths := make([]int, len(t.header))
	all := append([]row{{cells: t.header}}, t.rows...)
	for _, r := range all {
		for i, c := range r.cells {
			if i < len(widths) && i < len(r.cells)-1 {
				widths[i] = max(widths[i], utf8.RuneCountInString(c))
			}
		}
	}
	var b strings.Builder
	for n, r := range all {
		for i, c := range r.cells {
			cell := c
			if colour && n > 0 && i == t.status {
				cell = paint(r.tone, c)
			}
			b.WriteString(cell)
			if i < len(r.cells)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+3))
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ANSI colours of a tone.
var tones = map[string]string{
	string(metav1.ConditionTrue):    "\x1b[32m", // green
	string(metav1.ConditionFalse):   "\x1b[31m", // red
	string(metav1.ConditionUnknown): "\x1b[33m", // yellow
	"missing":                       "\x1b[31m",
	"bold":                          "\x1b[1m",
}

func paint(tone, s string) string {
	if code, ok := tones[tone]; ok && s != "" {
		return code + s + "\x1b[0m"
	}
	return s
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// age is how long ago t was, as kubectl prints ages; "-" for no time.
func age(now time.Time, t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// tree drawing: the prefix of a node at its depth, given whether each ancestor (and the
// node) is the last of its siblings.
func treePrefix(lasts []bool) string {
	if len(lasts) == 0 {
		return ""
	}
	var b strings.Builder
	for _, last := range lasts[:len(lasts)-1] {
		if last {
			b.WriteString("   ")
		} else {
			b.WriteString("│  ")
		}
	}
	if lasts[len(lasts)-1] {
		b.WriteString("└─ ")
	} else {
		b.WriteString("├─ ")
	}
	return b.String()
}

// printStructured writes v as JSON or YAML (format is "json" or "yaml").
func printStructured(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// conditionStatus is the status of the condition typ, "-" when it is absent.
func conditionStatus(conds []metav1.Condition, typ string) (status, reason, message string) {
	for _, c := range conds {
		if c.Type == typ {
			return string(c.Status), c.Reason, c.Message
		}
	}
	return "-", "", ""
}
