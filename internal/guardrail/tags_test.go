package guardrail

import (
	"strings"
	"testing"
)

func TestCheckTags(t *testing.T) {
	for _, ok := range []map[string]string{
		nil,
		{"team": "analytics", "cost center": "Zürich 42", "a_b.c:d/e=f+g-h@i": "ok", "empty": ""},
	} {
		if err := CheckTags(ok); err != nil {
			t.Errorf("CheckTags(%v) = %v, want nil", ok, err)
		}
	}
	for _, tc := range []struct {
		tags map[string]string
		want string
	}{
		{map[string]string{"team#1": "a"}, `tag key "team#1"`},
		{map[string]string{"team": "a<b>"}, `the value of tag "team"`},
		{map[string]string{"ok": "x", "b\tc": "y"}, `tag key "b\tc"`},
		{map[string]string{"q": `"quoted"`}, `the value of tag "q"`},
	} {
		err := CheckTags(tc.tags)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckTags(%v) = %v, want a refusal naming %s", tc.tags, err, tc.want)
		}
	}
}
