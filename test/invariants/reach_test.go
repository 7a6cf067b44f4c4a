package invariants

import (
	"maps"
	"slices"
	"testing"
)

func TestReach(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
		denies    bool
	}{
		{"lists", `{"Statement":[{"Effect":"Allow","Action":["s3:GetObject","s3:PutObject"],"Resource":["arn:aws:s3:::a/*"]}]}`,
			[]string{"s3:GetObject on arn:aws:s3:::a/*", "s3:PutObject on arn:aws:s3:::a/*"}, false},
		{"one statement, strings", `{"Statement":{"Effect":"Allow","Action":"s3:ListBucket","Resource":"arn:aws:s3:::a"}}`,
			[]string{"s3:ListBucket on arn:aws:s3:::a"}, false},
		{"not-action", `{"Statement":[{"Effect":"Allow","NotAction":"iam:*","Resource":"*"}]}`,
			[]string{"* except iam:* on *"}, false},
		{"deny", `{"Statement":[{"Effect":"Deny","Action":"s3:*","Resource":"*"}]}`, nil, true},
		{"url-encoded", "%7B%22Statement%22%3A%7B%22Effect%22%3A%22Allow%22%2C%22Action%22%3A%22s3%3AGetObject%22%2C%22Resource%22%3A%22r%22%7D%7D",
			[]string{"s3:GetObject on r"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, denies, err := reach(tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, tc.want) || denies != tc.denies {
				t.Errorf("reach = %v, denies %v; want %v, %v", keys, denies, tc.want, tc.denies)
			}
		})
	}
	if _, _, err := reach("not a policy"); err == nil {
		t.Error("a document that is not JSON was read")
	}
}
