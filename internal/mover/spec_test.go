package mover

import (
	"strings"
	"testing"
)

func validSpec() Spec {
	return Spec{
		MoveID: "0f6c1e2a-8a63-4f5e-9d41-1f1f7a0b2c3d", Mode: ModeCopy, Pass: 1,
		Source: Bucket{Endpoint: "http://a", Bucket: "src"}, Target: Bucket{Endpoint: "http://b", Bucket: "dst"},
	}
}

func TestSpecValidate(t *testing.T) {
	ok := validSpec()
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	cases := map[string]func(*Spec){
		"moveID":     func(s *Spec) { s.MoveID = "Not_A_Label" },
		"same":       func(s *Spec) { s.Target = s.Source },
		"versions":   func(s *Spec) { s.Versions = "Some" },
		"mode":       func(s *Spec) { s.Mode = "Copy everything" },
		"pass":       func(s *Spec) { s.Pass = 0 },
		"shards":     func(s *Spec) { s.Mode = ModePlan },
		"boundaries": func(s *Spec) { s.Boundaries = []string{"b", "a"} },
		"duplicate":  func(s *Spec) { s.Boundaries = []string{"a", "a"} },
		"partSize":   func(s *Spec) { s.Limits.PartSize = 1 << 20 },
	}
	for name, mod := range cases {
		s := validSpec()
		mod(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: spec accepted", name)
		}
	}
}

func TestSpecRanges(t *testing.T) {
	s := validSpec()
	s.Boundaries = []string{"g", "p"}
	want := []KeyRange{{"", "g"}, {"g", "p"}, {"p", ""}}
	for i, w := range want {
		r, err := s.Range(i)
		if err != nil || r != w {
			t.Errorf("shard %d: %+v, %v; want %+v", i, r, err, w)
		}
	}
	if _, err := s.Range(3); err == nil {
		t.Error("shard 3 of 3 accepted")
	}
	r := KeyRange{After: "g", Last: "p"}
	for k, in := range map[string]bool{"g": false, "ga": true, "p": true, "pa": false} {
		if r.Contains(k) != in {
			t.Errorf("%+v contains %q: %v", r, k, !in)
		}
	}
	if !strings.Contains(validSpec().MoveID, "-") {
		t.Fatal("test spec's moveID should look like a UID")
	}
}
