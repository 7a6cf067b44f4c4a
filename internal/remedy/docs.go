package remedy

import (
	"fmt"
	"strings"
)

// DocsBegin and DocsEnd mark the generated table in docs/kubectl-plugin.md.
const (
	DocsBegin = "<!-- reasons begin (generated from internal/remedy by make reasons-doc) -->"
	DocsEnd   = "<!-- reasons end -->"
)

// stateOrder is the order of the docs' sections: what needs a person first.
var stateOrder = []struct {
	state State
	title string
}{
	{Blocked, "A person must act"},
	{Waiting, "The operator is at it, or waits for the store"},
	{Fine, "Nothing to do"},
}

// Markdown renders the table as the docs print it: one markdown table per state, rows
// by reason.
func Markdown() string {
	var b strings.Builder
	for i, s := range stateOrder {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "**%s**\n\n| Reason | Who acts | What it means | What to do |\n|---|---|---|---|\n", s.title)
		for _, r := range sorted {
			if r.State != s.state {
				continue
			}
			who := string(r.Who)
			if who == "" {
				who = "nobody"
			}
			means := r.Means
			if r.Guardrail != "" {
				means += " Guardrail: " + r.Guardrail + "."
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.Reason, who, cell(means), cell(r.Do))
		}
	}
	return b.String()
}

// cell keeps a text inside its markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
