package awspolicy

import (
	"bytes"
	"encoding/json"
)

// DocsBegin and DocsEnd mark the rendered policy in docs/access.md, inside a json
// code block.
const (
	DocsBegin = "<!-- aws-operator-policy:begin -->"
	DocsEnd   = "<!-- aws-operator-policy:end -->"
)

// statementJSON is a statement as the policy document writes it: the fields in
// AWS's usual order, one action as a string and several as a list.
type statementJSON struct {
	Sid      string `json:"Sid"`
	Effect   string `json:"Effect"`
	Action   any    `json:"Action"`
	Resource string `json:"Resource"`
}

type documentJSON struct {
	Version   string          `json:"Version"`
	Statement []statementJSON `json:"Statement"`
}

// Document renders Statements as an IAM policy document allowing them, indented,
// with the placeholders BucketNamePrefix and AccountID in its resources. The same
// list gives the same bytes.
func Document() string {
	doc := documentJSON{Version: "2012-10-17"}
	for _, st := range Statements {
		names := make([]string, 0, len(st.Actions))
		for _, a := range st.Actions {
			names = append(names, a.Name)
		}
		var act any = names
		if len(names) == 1 {
			act = names[0]
		}
		doc.Statement = append(doc.Statement, statementJSON{Sid: st.Sid, Effect: "Allow", Action: act, Resource: st.Resource})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the placeholders' < and > stay as users read them
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		panic(err) // strings only: cannot fail
	}
	return buf.String()
}

// DocsBlock is what docs/access.md holds between DocsBegin and DocsEnd: Document
// in a json code block.
func DocsBlock() string {
	return "```json\n" + Document() + "```\n"
}
