package invariants

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// reach reads an IAM policy document as the set of "<action> on <resource>" pairs its
// Allow statements grant, and whether it has a Deny. A wildcard is kept as written
// ("s3:* on arn:aws:s3:::*"), so it matches no pair of the operator's own policies and
// shows up as reaching beyond them. NotAction and NotResource allow everything but a
// list: they are reported as such a wildcard. The document may be URL-encoded, as AWS's
// GetUserPolicy returns it.
func reach(doc string) (allowed map[string]bool, denies bool, err error) {
	doc = strings.TrimSpace(doc)
	if !strings.HasPrefix(doc, "{") {
		if doc, err = url.QueryUnescape(doc); err != nil {
			return nil, false, fmt.Errorf("neither JSON nor URL-encoded JSON: %w", err)
		}
	}
	var parsed struct {
		Statement statementList `json:"Statement"`
	}
	if err := json.Unmarshal([]byte(doc), &parsed); err != nil {
		return nil, false, err
	}
	allowed = map[string]bool{}
	for _, raw := range parsed.Statement {
		var st struct {
			Effect      string      `json:"Effect"`
			Action      stringOrSet `json:"Action"`
			NotAction   stringOrSet `json:"NotAction"`
			Resource    stringOrSet `json:"Resource"`
			NotResource stringOrSet `json:"NotResource"`
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			return nil, false, fmt.Errorf("statement %s: %w", raw, err)
		}
		if !strings.EqualFold(st.Effect, "Allow") {
			denies = true
			continue
		}
		actions, resources := []string(st.Action), []string(st.Resource)
		if len(st.NotAction) > 0 {
			actions = append(actions, "* except "+strings.Join(st.NotAction, "|"))
		}
		if len(st.NotResource) > 0 {
			resources = append(resources, "* except "+strings.Join(st.NotResource, "|"))
		}
		for _, a := range actions {
			for _, r := range resources {
				allowed[a+" on "+r] = true
			}
		}
	}
	return allowed, denies, nil
}

// stringOrSet is a policy element that is a string or a list of strings.
type stringOrSet []string

func (s *stringOrSet) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = many
	return nil
}

// statementList is a Statement: one object or a list of them.
type statementList []json.RawMessage

func (s *statementList) UnmarshalJSON(b []byte) error {
	if t := strings.TrimSpace(string(b)); strings.HasPrefix(t, "{") {
		*s = []json.RawMessage{b}
		return nil
	}
	var many []json.RawMessage
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = many
	return nil
}
