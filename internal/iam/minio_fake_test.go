package iam

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// fakeMinIO is an httptest stand-in for MinIO's admin API as minio.go uses it, after
// MinIO's handlers (cmd/admin-handlers-users.go): it checks each request's SigV4
// signature and payload hash, decrypts sealed bodies and encrypts the answers MinIO
// encrypts, and keeps users, canned policies, their mapping and service accounts. The
// real MinIO runs the same driver in the contract test.
type fakeMinIO struct {
	t                 *testing.T
	srv               *httptest.Server
	accessKey, secret string

	mu       sync.Mutex
	users    map[string]bool
	policies map[string]string
	mapping  map[string]string
	keys     map[string]fakeKey
	requests map[string]int // by path, e.g. "add-user"
	// fail answers the next requests of a path with a status (and a MinIO code).
	fail map[string][]fakeFailure
	// answer, if set, replaces a path's answer body (e.g. a tampered or huge one).
	answer map[string][]byte
	// hold, if set, keeps requests of a path until it is closed.
	hold map[string]chan struct{}
}

type fakeKey struct{ parent, secret, description string }

type fakeFailure struct {
	status int
	code   string
}

func newFakeMinIO(t *testing.T) *fakeMinIO {
	f := &fakeMinIO{t: t, accessKey: "operator", secret: "operator-secret-key",
		users: map[string]bool{}, policies: map[string]string{}, mapping: map[string]string{}, keys: map[string]fakeKey{},
		requests: map[string]int{}, fail: map[string][]fakeFailure{}, answer: map[string][]byte{}, hold: map[string]chan struct{}{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeMinIO) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[path]
}

func (f *fakeMinIO) failNext(path string, status int, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[path] = append(f.fail[path], fakeFailure{status, code})
}

func (f *fakeMinIO) errorJSON(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Code": code, "Message": code + " (fake)"})
}

// verified checks the signature the way MinIO does: the same request signed again
// with the operator's secret key at the request's own time must match.
func (f *fakeMinIO) verified(r *http.Request, body []byte) bool {
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	if r.Header.Get("X-Amz-Content-Sha256") != hash {
		return false
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return false
	}
	again, _ := http.NewRequest(r.Method, f.srv.URL+r.URL.RequestURI(), bytes.NewReader(body))
	for _, h := range []string{"X-Amz-Content-Sha256", "Content-Type", "X-Amz-Security-Token"} {
		if v := r.Header.Get(h); v != "" {
			again.Header.Set(h, v)
		}
	}
	if err := v4.NewSigner().SignHTTP(r.Context(), aws.Credentials{AccessKeyID: f.accessKey, SecretAccessKey: f.secret}, again, hash, "s3", "us-east-1", at); err != nil {
		return false
	}
	return again.Header.Get("Authorization") == r.Header.Get("Authorization")
}

func (f *fakeMinIO) serve(w http.ResponseWriter, r *http.Request) {
	path, ok := strings.CutPrefix(r.URL.Path, adminPrefix)
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests[path]++
	hold := f.hold[path]
	var failure *fakeFailure
	if q := f.fail[path]; len(q) > 0 {
		failure, f.fail[path] = &q[0], q[1:]
	}
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	if !f.verified(r, body) {
		f.errorJSON(w, http.StatusForbidden, "SignatureDoesNotMatch")
		return
	}
	if failure != nil {
		f.errorJSON(w, failure.status, failure.code)
		return
	}
	q := r.URL.Query()
	f.mu.Lock()
	defer f.mu.Unlock()
	var answer any
	sealed := false
	switch path {
	case "user-info":
		if !f.users[q.Get("accessKey")] {
			f.errorJSON(w, 404, "XMinioAdminNoSuchUser")
			return
		}
		answer = map[string]string{"status": "enabled", "policyName": f.mapping[q.Get("accessKey")]}
	case "add-user":
		var req struct{ SecretKey, Status string }
		if !f.open(w, body, &req) {
			return
		}
		if len(req.SecretKey) < 8 {
			f.errorJSON(w, 400, "XMinioAdminInvalidArgument")
			return
		}
		f.users[q.Get("accessKey")] = true
	case "add-canned-policy":
		if !json.Valid(body) {
			f.errorJSON(w, 400, "XMinioMalformedIAMPolicy")
			return
		}
		f.policies[q.Get("name")] = string(body)
	case "set-user-or-group-policy":
		user, policy := q.Get("userOrGroup"), q.Get("policyName")
		switch {
		case !f.users[user]:
			f.errorJSON(w, 404, "XMinioAdminNoSuchUser")
			return
		case policy == "":
			delete(f.mapping, user)
		case f.policies[policy] == "":
			f.errorJSON(w, 404, "XMinioAdminNoSuchPolicy")
			return
		default:
			f.mapping[user] = policy
		}
	case "info-canned-policy":
		doc, ok := f.policies[q.Get("name")]
		if !ok {
			f.errorJSON(w, 404, "XMinioAdminNoSuchPolicy")
			return
		}
		answer = json.RawMessage(doc)
	case "remove-canned-policy":
		name := q.Get("name")
		if _, ok := f.policies[name]; !ok {
			f.errorJSON(w, 404, "XMinioAdminNoSuchPolicy")
			return
		}
		for _, p := range f.mapping {
			if p == name {
				f.errorJSON(w, 400, "XMinioAdminPolicyInUse")
				return
			}
		}
		delete(f.policies, name)
	case "list-service-accounts":
		var accounts []map[string]string
		for ak, k := range f.keys {
			if k.parent == q.Get("user") {
				accounts = append(accounts, map[string]string{"parentUser": k.parent, "accessKey": ak, "description": k.description})
			}
		}
		answer, sealed = map[string]any{"accounts": accounts}, true
	case "add-service-account":
		var req struct{ TargetUser, Description string }
		if !f.open(w, body, &req) {
			return
		}
		if !f.users[req.TargetUser] {
			f.errorJSON(w, 404, "XMinioAdminNoSuchUser")
			return
		}
		ak, sk := strings.ToUpper(rand.Text()[:20]), rand.Text()
		f.keys[ak] = fakeKey{parent: req.TargetUser, secret: sk, description: req.Description}
		answer, sealed = map[string]any{"credentials": map[string]string{"accessKey": ak, "secretKey": sk}}, true
	case "delete-service-account":
		if _, ok := f.keys[q.Get("accessKey")]; !ok {
			f.errorJSON(w, 404, "XMinioInvalidIAMCredentials")
			return
		}
		delete(f.keys, q.Get("accessKey"))
	case "remove-user":
		user := q.Get("accessKey")
		for ak, k := range f.keys {
			if k.parent == user {
				delete(f.keys, ak)
			}
		}
		delete(f.mapping, user)
		delete(f.users, user)
	case "list-users":
		all := map[string]any{}
		for u := range f.users {
			all[u] = map[string]string{"status": "enabled"}
		}
		answer, sealed = all, true
	default:
		f.errorJSON(w, 400, "XMinioAdminInvalidArgument")
		return
	}
	out, replaced := f.answer[path]
	if answer != nil && !replaced {
		out, _ = json.Marshal(answer)
		if sealed {
			out, _ = encryptAdminBody(context.Background(), f.secret, out)
		}
	}
	_, _ = w.Write(out)
}

// open decrypts a sealed request body into v; MinIO answers a body it cannot
// decrypt or parse XMinioAdminConfigBadJSON.
func (f *fakeMinIO) open(w http.ResponseWriter, body []byte, v any) bool {
	plain, err := decryptAdminBody(context.Background(), f.secret, body)
	if err == nil {
		err = json.Unmarshal(plain, v)
	}
	if err != nil {
		f.errorJSON(w, 400, "XMinioAdminConfigBadJSON")
		return false
	}
	return true
}

// minioTestTimeout is the per-call deadline of the tests' MinIO drivers. Each sealed
// call derives argon2id keys (64 MiB each) one at a time per process, on both sides of
// the fake; built with the race detector and beside the package's other parallel tests
// on two loaded cores, one derivation took seconds and a call behind a few others
// passed the operator's 10 s default. These tests are about what the calls do, not
// their deadlines (TestMinIOErrors sets its own where the deadline is the subject).
const minioTestTimeout = time.Minute

func (f *fakeMinIO) driver(t *testing.T, secret string, observe func(string, int, error)) Driver {
	t.Helper()
	d, err := New(t.Context(), Config{API: APIMinIO, Endpoint: f.srv.URL, AccessKeyID: f.accessKey, SecretAccessKey: secret,
		Timeout: minioTestTimeout, Observer: observe})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

func (f *fakeMinIO) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("users %v, policies %d, mapping %v, keys %d", f.users, len(f.policies), f.mapping, len(f.keys))
}

// state is what the fake keeps, copied under its lock.
type fakeState struct {
	users    map[string]bool
	policies map[string]string
	mapping  map[string]string
	keys     map[string]fakeKey
}

func (f *fakeMinIO) state() fakeState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fakeState{users: maps.Clone(f.users), policies: maps.Clone(f.policies), mapping: maps.Clone(f.mapping), keys: maps.Clone(f.keys)}
}

func (f *fakeMinIO) setAnswer(path string, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if body == nil {
		delete(f.answer, path)
	} else {
		f.answer[path] = body
	}
}

func (f *fakeMinIO) setHold(path string, ch chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hold[path] = ch
}
