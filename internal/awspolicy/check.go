package awspolicy

import (
	"fmt"
	"slices"
	"strings"
)

// Request is one request a client sent, as far as AWS's authorization of it goes.
type Request struct {
	// Service is the SDK's service ID in lower case: "s3", "iam", "sts".
	Service string
	// Operation is the SDK's operation name: "GetObjectTagging", "CreateRole".
	Operation string
	// Conditions are what the request carries beyond the operation (sorted, once
	// each): Versioned and Unversioned for a request on objects (a DeleteObjects may
	// carry both), Tagged, Retention, LegalHold, BypassGovernance, ObjectLock.
	Conditions []Condition
}

func (r Request) String() string {
	s := r.Service + " " + r.Operation
	if len(r.Conditions) > 0 {
		parts := make([]string, len(r.Conditions))
		for i, c := range r.Conditions {
			parts[i] = c.String()
		}
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

// needs are the conditions each of which an action of the list must meet for r: the
// operation itself (Always, or the object's Versioned or Unversioned), and each
// other condition r carries.
func (r Request) needs() []Condition {
	var out []Condition
	if !slices.Contains(r.Conditions, Versioned) && !slices.Contains(r.Conditions, Unversioned) {
		out = append(out, Always)
	}
	return append(out, r.Conditions...)
}

// meets says whether u covers the need c of a request of its operation: a use for
// every request covers the operation itself, whichever version it names.
func (u Use) meets(c Condition) bool {
	return u.When == c || (u.When == Always && (c == Versioned || c == Unversioned))
}

// Actions returns the actions of the list that r needs, in the list's order.
func Actions(r Request) []string {
	var out []string
	for _, st := range Statements {
		for _, a := range st.Actions {
			if service(a.Name) != r.Service {
				continue
			}
			for _, u := range a.Uses {
				if u.Operation == r.Operation && slices.ContainsFunc(r.needs(), u.meets) && !slices.Contains(out, a.Name) {
					out = append(out, a.Name)
				}
			}
		}
	}
	return out
}

// Missing says, for each need of r that no action of the list meets, that r lacks
// its action; nil when the list authorizes r.
func Missing(r Request) []string {
	var out []string
	for _, c := range r.needs() {
		if !covered(r.Service, r.Operation, c) {
			what := r.Service + " " + r.Operation
			if c != Always {
				what += " " + c.String()
			}
			out = append(out, fmt.Sprintf("%s: no action of internal/awspolicy's list authorizes it", what))
		}
	}
	return out
}

func covered(svc, op string, c Condition) bool {
	for _, st := range Statements {
		for _, a := range st.Actions {
			if service(a.Name) != svc {
				continue
			}
			for _, u := range a.Uses {
				if u.Operation == op && u.meets(c) {
					return true
				}
			}
		}
	}
	return false
}

// ResourceOf returns the resource of the statement that allows action, "" when no
// statement does.
func ResourceOf(action string) string {
	for _, st := range Statements {
		for _, a := range st.Actions {
			if a.Name == action {
				return st.Resource
			}
		}
	}
	return ""
}

// service is the service of an action name: "s3" of "s3:GetObject".
func service(action string) string {
	svc, _, _ := strings.Cut(action, ":")
	return svc
}
