package naming

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestBucketName(t *testing.T) {
	cases := []struct {
		prefix, namespace, name string
		wantPrefix              string
	}{
		{"", "default", "photos", "default-photos-"},
		{"dev", "default", "photos", "dev-default-photos-"},
		{"", "team-a", "my.bucket", "team-a-my-bucket-"},
		{"", "sthree", "x", "bk-sthree-x-"},
		{"", "xn", "x", "bk-xn-x-"},
		{"prod", strings.Repeat("n", 63), strings.Repeat("m", 253), "prod-" + strings.Repeat("n", 49)},
	}
	for _, tc := range cases {
		got := BucketName(tc.prefix, tc.namespace, tc.name)
		if !strings.HasPrefix(got, tc.wantPrefix) {
			t.Errorf("BucketName(%q, %q, %q) = %q, want prefix %q", tc.prefix, tc.namespace, tc.name, got, tc.wantPrefix)
		}
		if err := Validate(got); err != nil {
			t.Errorf("BucketName(%q, %q, %q): %v", tc.prefix, tc.namespace, tc.name, err)
		}
	}
}

// TestBucketNameSeparatesAmbiguousJoins: "a-b"/"c" and "a"/"b-c" read the same once
// joined; the hash must still tell the two claims apart.
func TestBucketNameSeparatesAmbiguousJoins(t *testing.T) {
	if a, b := BucketName("", "a-b", "c"), BucketName("", "a", "b-c"); a == b {
		t.Fatalf("two claims derive the same bucket %q", a)
	}
	if a, b := BucketName("x", "a", "b"), BucketName("", "x-a", "b"); a == b {
		t.Fatalf("prefix and namespace are confused: %q", a)
	}
}

func TestValidate(t *testing.T) {
	for _, bad := range []string{"ab", strings.Repeat("a", 64), "Abc", "a_b", "-ab", "ab-", "a..b", "192.168.0.1", "xn--ab", "sthree-ab", "ab-s3alias", "ab--ol-s3", "ab.mrap"} {
		if Validate(bad) == nil {
			t.Errorf("Validate(%q) accepted an invalid name", bad)
		}
	}
	for _, good := range []string{"abc", "my.bucket-1", strings.Repeat("a", 63), "1.2.3"} {
		if err := Validate(good); err != nil {
			t.Errorf("Validate(%q): %v", good, err)
		}
	}
}

// FuzzBucketName: whatever the namespace, name and prefix, the derived name is valid
// under S3's rules and the same every time.
func FuzzBucketName(f *testing.F) {
	f.Add("", "default", "photos")
	f.Add("dev", "kube-system", "a.b.c")
	f.Add("", "sthree", "-")
	f.Add("UPPER", "ns", strings.Repeat("x.", 200))
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, prefix, namespace, name string) {
		got := BucketName(prefix, namespace, name)
		if err := Validate(got); err != nil {
			t.Fatalf("BucketName(%q, %q, %q): %v", prefix, namespace, name, err)
		}
		if again := BucketName(prefix, namespace, name); again != got {
			t.Fatalf("not deterministic: %q then %q", got, again)
		}
	})
}

func TestLabelValue(t *testing.T) {
	short := "reports"
	if got := LabelValue(short); got != short {
		t.Errorf("LabelValue(%q) = %q, want it unchanged", short, got)
	}
	exact := strings.Repeat("a", 63)
	if got := LabelValue(exact); got != exact {
		t.Errorf("a 63-character name was changed: %q", got)
	}
	long := strings.Repeat("b", 62) + ".-" + strings.Repeat("c", 189)
	other := strings.Repeat("b", 62) + ".-" + strings.Repeat("d", 189)
	a, b := LabelValue(long), LabelValue(other)
	if a == b {
		t.Errorf("two long names share the label value %q", a)
	}
	for _, v := range []string{a, b, LabelValue(strings.Repeat("x", 46) + "-" + strings.Repeat("y", 40))} {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("LabelValue gave %q: %v", v, errs)
		}
	}
	if LabelValue(long) != a {
		t.Error("LabelValue is not deterministic")
	}
}

func TestLaneStem(t *testing.T) {
	for _, c := range []struct{ prefix, ns, want string }{
		{"", "team", "team-"},
		{"acme", "team", "acme-team-"},
		{"acme-", "team", "acme-team-"},
		{"acme.", "team", "acme.team-"},
		{"acme", "a--b", "acme-a--b-"}, // kept as written: "a-b" has another stem
	} {
		if got := LaneStem(c.prefix, c.ns); got != c.want {
			t.Errorf("LaneStem(%q, %q) = %q, want %q", c.prefix, c.ns, got, c.want)
		}
	}
	// Every derived name of a namespace starts with its stem while it fits.
	if name := BucketName("acme", "team", "data"); !strings.HasPrefix(name, LaneStem("acme", "team")) {
		t.Errorf("derived %q does not start with the stem", name)
	}
}

func TestHasDerivedShape(t *testing.T) {
	if !HasDerivedShape(BucketName("acme", "team", "data")) {
		t.Error("a derived name is not of the derived shape")
	}
	for _, name := range []string{"acme-team-logs", "acme-team-logs-2024", "acme-team-deadbeefx", "acme-team-DEADBEEF", "acme-team-dead.beef"} {
		if HasDerivedShape(name) {
			t.Errorf("%q is taken for a derived name", name)
		}
	}
	if !HasDerivedShape("acme-team-logs-0123abcd") {
		t.Error("-0123abcd is the derived shape")
	}
}

func TestLongerLanes(t *testing.T) {
	for _, c := range []struct {
		prefix, ns, name string
		want             []string
	}{
		{"p", "a", "p-a-b-x", []string{"a-b"}},
		{"p", "a", "p-a-b-c-x", []string{"a-b", "a-b-c"}},
		{"p", "a", "p-a--b-x", []string{"a--b"}},
		{"p", "a", "p-a-logs", nil},
		{"p", "a", "p-other-x", nil}, // not in the stem at all
		{"", "a", "a-b-x", []string{"a-b"}},
	} {
		if got := LongerLanes(c.prefix, c.ns, c.name); !slices.Equal(got, c.want) {
			t.Errorf("LongerLanes(%q, %q, %q) = %q, want %q", c.prefix, c.ns, c.name, got, c.want)
		}
	}
	// Candidates longer than a namespace name can be are not asked for.
	long := strings.Repeat("n", 61)
	if got := LongerLanes("p", long, "p-"+long+"-ab-cd-x"); len(got) != 0 {
		t.Errorf("candidates past 63 characters: %q", got)
	}
}
