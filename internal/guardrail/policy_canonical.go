package guardrail

import (
	"bytes"
	"encoding/json"
)

// The canonical form is what the operator sends a store: the document exactly as the
// strict parser read it, written again with its keys in the grammar's order (Version,
// Id, Statement; Sid, Effect, Principal, NotPrincipal, Action, NotAction, Resource,
// NotResource, Condition; principal types, condition operators and keys sorted),
// without whitespace, and Statement always a list (Versity refuses a single object).
// Everything else stays as written: a string stays a string and a list a list, numbers
// keep their digits, and a missing Version stays missing (it means 2008-10-17, where
// policy variables are not expanded). Re-parsing the canonical form gives it back byte
// for byte.

type canonicalPolicy struct {
	Version   *string              `json:"Version,omitempty"`
	ID        *string              `json:"Id,omitempty"`
	Statement []canonicalStatement `json:"Statement"`
}

type canonicalStatement struct {
	Sid          *string                    `json:"Sid,omitempty"`
	Effect       string                     `json:"Effect"`
	Principal    any                        `json:"Principal,omitempty"`
	NotPrincipal any                        `json:"NotPrincipal,omitempty"`
	Action       any                        `json:"Action,omitempty"`
	NotAction    any                        `json:"NotAction,omitempty"`
	Resource     any                        `json:"Resource,omitempty"`
	NotResource  any                        `json:"NotResource,omitempty"`
	Condition    *map[string]map[string]any `json:"Condition,omitempty"` // pointer: an empty Condition is kept
}

// canonical writes d in the canonical form. encoding/json writes struct fields in
// their order and map keys sorted, which is the fixed order; HTML escaping is off so
// that "<", ">" and "&" in a condition stay as the tenant wrote them.
func (d *policyDoc) canonical() []byte {
	out := canonicalPolicy{Version: d.version, ID: d.id, Statement: make([]canonicalStatement, 0, len(d.statements))}
	for _, st := range d.statements {
		cs := canonicalStatement{
			Sid: st.sid, Effect: st.effect,
			Principal: st.principal.tree(), NotPrincipal: st.notPrincipal.tree(),
			Action: st.action.tree(), NotAction: st.notAction.tree(),
			Resource: st.resource.tree(), NotResource: st.notResource.tree(),
		}
		if st.condition != nil {
			c := make(map[string]map[string]any, len(st.condition))
			for op, keys := range st.condition {
				c[op] = make(map[string]any, len(keys))
				for k, v := range keys {
					c[op][k] = v.tree()
				}
			}
			cs.Condition = &c
		}
		out.Statement = append(out.Statement, cs)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		// Only strings, json.Numbers the decoder checked, booleans, maps and slices:
		// nothing here can fail to encode.
		panic("guardrail: encoding a parsed policy: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// tree is v as encoding/json should write it; nil (omitted) when v is nil.
func (v *values) tree() any {
	switch {
	case v == nil:
		return nil
	case v.isList:
		return v.list
	default:
		return v.list[0]
	}
}

func (p *principal) tree() any {
	switch {
	case p == nil:
		return nil
	case p.wildcard:
		return "*"
	}
	out := make(map[string]any, len(p.ids))
	for typ, ids := range p.ids {
		out[typ] = ids.tree()
	}
	return out
}

func (v conditionValue) tree() any {
	if v.isList {
		return v.list
	}
	return v.list[0]
}
