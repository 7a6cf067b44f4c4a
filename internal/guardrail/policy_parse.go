package guardrail

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// The policy grammar, read strictly. Go-based stores (Versity, SeaweedFS) decode a
// policy into structs, and encoding/json matches struct fields case-insensitively and
// keeps the last of duplicate keys: a harmless "Statement" beside a public "statement"
// would pass a check that reads only "Statement" and then be applied as the other. So
// every key must be one the grammar knows, in its exact case, at most once; the store
// is then sent the document as parsed here (canonical), never the tenant's bytes.

// Keys of the grammar, in the order the canonical form writes them.
var (
	policyKeys    = []string{"Version", "Id", "Statement"}
	statementKeys = []string{"Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction", "Resource", "NotResource", "Condition"}
	// principalTypes are the keys of a Principal object.
	principalTypes = []string{"AWS", "CanonicalUser", "Federated", "Service"}
	// policyVersions are the versions of the policy language.
	policyVersions = []string{"2012-10-17", "2008-10-17"}
)

// policyDoc is a bucket policy as the strict parser read it.
type policyDoc struct {
	version, id *string
	statements  []statement
}

type statement struct {
	sid                     *string
	effect                  string // "Allow" or "Deny"
	principal, notPrincipal *principal
	action, notAction       *values
	resource, notResource   *values
	condition               condition // nil: none
}

// values is IAM's "a string or a list of strings", kept in the form it came in: stores
// differ in which forms they accept, so the canonical form changes key order only.
type values struct {
	list   []string
	isList bool
}

// principal is "*" or principal IDs by type (AWS, CanonicalUser, Federated, Service).
type principal struct {
	wildcard bool
	ids      map[string]*values
}

// condition maps operator to condition key to its value(s): strings, numbers
// (json.Number, as written) and booleans.
type condition map[string]map[string]conditionValue

type conditionValue struct {
	list   []any
	isList bool
}

// parser reads a policy from encoding/json's token stream, which sees every key as
// written (Unmarshal would fold case and drop duplicates before anyone could look).
type parser struct{ dec *json.Decoder }

// parsePolicy reads doc by the strict grammar. It checks the grammar only; what a
// bucket allows (resources, actions, principals) is InspectPolicy's.
func parsePolicy(doc []byte) (*policyDoc, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber() // numbers in conditions are sent as written
	p := &parser{dec: dec}
	tok, err := p.token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, refuse("policy must be a JSON object")
	}
	d := &policyDoc{}
	hasStatement := false
	err = p.members("the policy", nil, func(key string) error {
		switch key {
		case "Version":
			v, err := p.str("Version")
			if err != nil {
				return err
			}
			if !slices.Contains(policyVersions, v) {
				return refuse("policy Version is %s; it must be %s or %s", quote(v), policyVersions[0], policyVersions[1])
			}
			d.version = &v
		case "Id":
			v, err := p.str("Id")
			if err != nil {
				return err
			}
			d.id = &v
		case "Statement":
			hasStatement = true
			d.statements, err = p.statements()
			return err
		default:
			return unknownKey("the policy", key, policyKeys)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, refuse("policy must be a single JSON object, with nothing after it")
	}
	if !hasStatement || len(d.statements) == 0 {
		return nil, refuse("policy must have a Statement: an object or a non-empty list of objects")
	}
	return d, nil
}

// token is the next token; a syntax error or an early end is a refusal.
func (p *parser) token() (json.Token, error) {
	tok, err := p.dec.Token()
	switch {
	case errors.Is(err, io.EOF):
		return nil, refuse("policy is not valid JSON: it ends early")
	case err != nil:
		return nil, refuse("policy is not valid JSON: %v", err)
	}
	return tok, nil
}

// members reads an object's members after its '{', calling member with each key to read
// its value. A key seen before is refused; so is, when folded is not nil, a key that
// differs from an earlier one only in case (folded collects the keys seen so far).
func (p *parser) members(where string, folded map[string]string, member func(key string) error) error {
	seen := map[string]bool{}
	for {
		tok, err := p.token()
		if err != nil {
			return err
		}
		if tok == json.Delim('}') {
			return nil
		}
		key, _ := tok.(string) // the decoder allows nothing else here
		if seen[key] {
			return refuse("%s has the key %s twice", where, quote(key))
		}
		seen[key] = true
		if folded != nil {
			lower := strings.ToLower(key)
			if earlier, ok := folded[lower]; ok {
				return refuse("%s has the keys %s and %s, which differ only in case", where, quote(earlier), quote(key))
			}
			folded[lower] = key
		}
		if err := member(key); err != nil {
			return err
		}
	}
}

// unknownKey refuses key where only known keys may be, naming the key it was probably
// meant to be when it differs from one only in case.
func unknownKey(where, key string, known []string) error {
	for _, k := range known {
		if strings.EqualFold(k, key) {
			return refuse("%s has the key %s; keys are case-sensitive, write %q", where, quote(key), k)
		}
	}
	return refuse("%s has the unknown key %s (known: %s)", where, quote(key), strings.Join(known, ", "))
}

func (p *parser) str(what string) (string, error) {
	tok, err := p.token()
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", refuse("policy %s must be a string", what)
	}
	return s, nil
}

// values reads a non-empty string or a non-empty list of non-empty strings.
func (p *parser) values(what string) (*values, error) {
	tok, err := p.token()
	if err != nil {
		return nil, err
	}
	bad := refuse("policy %s must be a non-empty string or a non-empty list of them", what)
	switch t := tok.(type) {
	case string:
		if t == "" {
			return nil, bad
		}
		return &values{list: []string{t}}, nil
	case json.Delim:
		if t != '[' {
			return nil, bad
		}
		v := &values{isList: true}
		for {
			tok, err := p.token()
			if err != nil {
				return nil, err
			}
			if tok == json.Delim(']') {
				break
			}
			s, ok := tok.(string)
			if !ok || s == "" {
				return nil, bad
			}
			v.list = append(v.list, s)
		}
		if len(v.list) == 0 {
			return nil, bad
		}
		return v, nil
	default:
		return nil, bad
	}
}

// statements reads Statement: one object or a list of objects.
func (p *parser) statements() ([]statement, error) {
	tok, err := p.token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		st, err := p.statement(0)
		if err != nil {
			return nil, err
		}
		return []statement{st}, nil
	case json.Delim('['):
		var out []statement
		for i := 0; ; i++ {
			tok, err := p.token()
			if err != nil {
				return nil, err
			}
			if tok == json.Delim(']') {
				return out, nil
			}
			if tok != json.Delim('{') {
				return nil, refuse("policy Statement[%d] must be an object", i)
			}
			st, err := p.statement(i)
			if err != nil {
				return nil, err
			}
			out = append(out, st)
		}
	default:
		return nil, refuse("policy must have a Statement: an object or a non-empty list of objects")
	}
}

// statement reads one statement after its '{'. Its own checks are the grammar's: an
// Effect, an Action or a NotAction (not both), at most one of Principal and
// NotPrincipal, of Resource and NotResource.
func (p *parser) statement(i int) (statement, error) {
	var st statement
	where := fmt.Sprintf("Statement[%d]", i)
	err := p.members("policy "+where, nil, func(key string) error {
		var err error
		what := where + " " + key
		switch key {
		case "Sid":
			var v string
			v, err = p.str(what)
			st.sid = &v
		case "Effect":
			st.effect, err = p.str(what)
			if err == nil && st.effect != "Allow" && st.effect != "Deny" {
				err = refuse("policy %s is %s; it must be Allow or Deny", what, quote(st.effect))
			}
		case "Principal":
			st.principal, err = p.principal(what)
		case "NotPrincipal":
			st.notPrincipal, err = p.principal(what)
		case "Action":
			st.action, err = p.values(what)
		case "NotAction":
			st.notAction, err = p.values(what)
		case "Resource":
			st.resource, err = p.values(what)
		case "NotResource":
			st.notResource, err = p.values(what)
		case "Condition":
			st.condition, err = p.condition(what)
		default:
			err = unknownKey("policy "+where, key, statementKeys)
		}
		return err
	})
	switch {
	case err != nil:
		return st, err
	case st.effect == "":
		return st, refuse("policy %s must have an Effect: Allow or Deny", where)
	case st.principal != nil && st.notPrincipal != nil:
		return st, refuse("policy %s has both Principal and NotPrincipal", where)
	case (st.action == nil) == (st.notAction == nil):
		return st, refuse("policy %s must have either an Action or a NotAction", where)
	case st.resource != nil && st.notResource != nil:
		return st, refuse("policy %s has both Resource and NotResource", where)
	}
	return st, nil
}

// principal reads "*" or an object of principal types, each a string or a list.
func (p *parser) principal(what string) (*principal, error) {
	tok, err := p.token()
	if err != nil {
		return nil, err
	}
	if tok == "*" {
		return &principal{wildcard: true}, nil
	}
	if tok != json.Delim('{') {
		return nil, refuse(`policy %s must be "*" or an object with %s`, what, strings.Join(principalTypes, ", "))
	}
	pr := &principal{ids: map[string]*values{}}
	err = p.members("policy "+what, nil, func(key string) error {
		if !slices.Contains(principalTypes, key) {
			return unknownKey("policy "+what, key, principalTypes)
		}
		v, err := p.values(what + " " + key)
		pr.ids[key] = v
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(pr.ids) == 0 {
		return nil, refuse("policy %s must name a principal", what)
	}
	return pr, nil
}

// condition reads operator -> key -> value(s). Operators and keys are open-ended (and
// compared case-insensitively by AWS), so they are not checked against a list, but two
// that differ only in case are refused: which one a store would use is anyone's guess.
func (p *parser) condition(what string) (condition, error) {
	tok, err := p.token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, refuse("policy %s must be an object of condition operators", what)
	}
	c := condition{}
	err = p.members("policy "+what, map[string]string{}, func(op string) error {
		tok, err := p.token()
		if err != nil {
			return err
		}
		if op == "" || tok != json.Delim('{') {
			return refuse("policy %s %s must be an object of condition keys", what, quote(op))
		}
		keys := map[string]conditionValue{}
		c[op] = keys
		where := fmt.Sprintf("policy %s %s", what, quote(op))
		return p.members(where, map[string]string{}, func(key string) error {
			if key == "" {
				return refuse("%s has an empty condition key", where)
			}
			v, err := p.conditionValue(fmt.Sprintf("%s %s", where, quote(key)))
			keys[key] = v
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// conditionValue reads a string, number or boolean, or a non-empty list of them.
func (p *parser) conditionValue(where string) (conditionValue, error) {
	bad := refuse("%s must be a string, number or boolean, or a non-empty list of them", where)
	tok, err := p.token()
	if err != nil {
		return conditionValue{}, err
	}
	if scalar(tok) {
		return conditionValue{list: []any{tok}}, nil
	}
	if tok != json.Delim('[') {
		return conditionValue{}, bad
	}
	v := conditionValue{isList: true}
	for {
		tok, err := p.token()
		if err != nil {
			return conditionValue{}, err
		}
		if tok == json.Delim(']') {
			break
		}
		if !scalar(tok) {
			return conditionValue{}, bad
		}
		v.list = append(v.list, tok)
	}
	if len(v.list) == 0 {
		return conditionValue{}, bad
	}
	return v, nil
}

func scalar(tok json.Token) bool {
	switch tok.(type) {
	case string, json.Number, bool:
		return true
	}
	return false
}
