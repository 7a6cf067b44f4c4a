package storagebucket

import "testing"

func TestSameEndpoint(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"http://127.0.0.1:8333", "http://127.0.0.1:8333", true},
		{"http://127.0.0.1:8333", "http://127.0.0.1:8333/", true},
		{"https://S3.Example.com", "https://s3.example.com:443", true},
		{"http://s3.example.com:80/", "http://s3.example.com", true},
		{"http://127.0.0.1:8333", "http://127.0.0.1:8334", false},
		{"http://s3.example.com", "https://s3.example.com", false},
		{"https://rgw.example.com/tenant-a", "https://rgw.example.com/tenant-b", false},
		// Another name of the same server is not told by its URL: the tag probe finds it.
		{"http://127.0.0.1:8333", "http://[::ffff:127.0.0.1]:8333", false},
	} {
		if got := sameEndpoint(tc.a, tc.b); got != tc.same {
			t.Errorf("sameEndpoint(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
