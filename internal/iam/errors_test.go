package iam

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestErrorKinds: the answers a store gives the operator's IAM calls, with and
// without a code, become the kinds the controllers act on.
func TestErrorKinds(t *testing.T) {
	cases := []struct {
		name   string
		status int
		code   string // "" sends no body
		want   Kind
	}{
		// Ceph RGW, to a key outside any account (the contract test meets it too).
		{"RGW key outside an account", http.StatusMethodNotAllowed, "MethodNotAllowed", KindNotImplemented},
		{"405 without a body", http.StatusMethodNotAllowed, "", KindNotImplemented},
		{"AWS throttling", http.StatusBadRequest, "Throttling", KindThrottled},
		{"unknown user", http.StatusNotFound, "NoSuchEntity", KindNoSuchEntity},
		{"third key", http.StatusConflict, "LimitExceeded", KindLimitExceeded},
		{"501 without a body", http.StatusNotImplemented, "", KindNotImplemented},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/xml")
				w.WriteHeader(tc.status)
				if tc.code != "" {
					_, _ = w.Write([]byte(`<ErrorResponse><Error><Type>Sender</Type><Code>` + tc.code +
						`</Code><Message>m</Message></Error><RequestId>1</RequestId></ErrorResponse>`))
				}
			}))
			defer srv.Close()
			d, err := New(context.Background(), Config{Endpoint: srv.URL, AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			err = d.Check(context.Background())
			if KindOf(err) != tc.want {
				t.Errorf("HTTP %d %q: %v (kind %s), want %s", tc.status, tc.code, err, KindOf(err), tc.want)
			}
			if IsTransient(err) != (tc.want == KindThrottled) {
				t.Errorf("IsTransient(%v) = %t", err, IsTransient(err))
			}
		})
	}
}
