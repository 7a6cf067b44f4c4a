package awspolicy

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestDocumentIsThePolicyOfTheList: the rendered document is an IAM policy that
// allows each action of the list, once, on its statement's resource, and nothing else.
func TestDocumentIsThePolicyOfTheList(t *testing.T) {
	var doc struct {
		Version   string
		Statement []struct {
			Sid, Effect, Resource string
			Action                json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(Document()), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if doc.Version != "2012-10-17" || len(doc.Statement) != len(Statements) {
		t.Fatalf("version %q, %d statements, want 2012-10-17 and %d", doc.Version, len(doc.Statement), len(Statements))
	}
	seen := map[string]string{}
	for i, st := range doc.Statement {
		var actions []string
		if err := json.Unmarshal(st.Action, &actions); err != nil {
			var one string
			if err := json.Unmarshal(st.Action, &one); err != nil {
				t.Fatalf("statement %s: Action %s", st.Sid, st.Action)
			}
			actions = []string{one}
		}
		want := Statements[i]
		if st.Sid != want.Sid || st.Effect != "Allow" || st.Resource != want.Resource || len(actions) != len(want.Actions) {
			t.Errorf("statement %d: %+v, want %s on %s with %d actions", i, st, want.Sid, want.Resource, len(want.Actions))
		}
		for _, a := range actions {
			if prev, ok := seen[a]; ok {
				t.Errorf("%s is allowed by %s and %s: one statement per action", a, prev, st.Sid)
			}
			seen[a] = st.Sid
		}
	}
	if Document() != Document() {
		t.Error("two renderings differ")
	}
	if !strings.Contains(Document(), `"arn:aws:s3:::<BUCKET_NAME_PREFIX>-*"`) {
		t.Errorf("the placeholders are not written as users read them:\n%s", Document())
	}
}

var actionName = regexp.MustCompile(`^(s3|iam):[A-Z][A-Za-z0-9]+$`)

// TestEveryActionIsNeeded: each action of the list names an S3 or IAM action (no
// wildcard) and at least one operation needs it; each statement's resource is one of
// its service's, scoped to the operator's own where the action takes one.
func TestEveryActionIsNeeded(t *testing.T) {
	sids := map[string]bool{}
	for _, st := range Statements {
		if sids[st.Sid] {
			t.Errorf("Sid %s twice", st.Sid)
		}
		sids[st.Sid] = true
		if len(st.Actions) == 0 {
			t.Errorf("statement %s allows nothing", st.Sid)
		}
		for _, a := range st.Actions {
			if !actionName.MatchString(a.Name) {
				t.Errorf("%s is not an S3 or IAM action name", a.Name)
			}
			if len(a.Uses) == 0 {
				t.Errorf("%s: no operation needs it", a.Name)
			}
			svc := service(a.Name)
			if st.Resource != "*" && !strings.HasPrefix(st.Resource, map[string]string{"s3": "arn:aws:s3:::" + BucketNamePrefix + "-", "iam": "arn:aws:iam::" + AccountID + ":"}[svc]) {
				t.Errorf("%s on %s: not a resource of the operator's %s", a.Name, st.Resource, svc)
			}
			for _, u := range a.Uses {
				if u.Operation == "" || strings.Contains(u.Operation, ":") {
					t.Errorf("%s: use %+v names no SDK operation", a.Name, u)
				}
			}
		}
	}
}
