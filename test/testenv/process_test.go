package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A peer that dies on its own once it served is reported at once with its log's
// tail; one the test stopped, or one that never served, is not.
func TestProcessReportsAnExitNobodyAskedFor(t *testing.T) {
	var reports LogBuffer
	crashReports = &reports
	t.Cleanup(func() { crashReports = os.Stderr })
	dir := t.TempDir()

	tool, err := StartProcess("/bin/sh", []string{"-c", "echo a tool, or a start that failed; exit 1"}, nil, dir, filepath.Join(dir, "tool.log"))
	if err != nil {
		t.Fatal(err)
	}
	<-tool.done
	if got := reports.String(); got != "" {
		t.Errorf("a process never marked serving was reported: %q", got)
	}

	crashed, err := StartProcess("/bin/sh", []string{"-c", "until [ -e served ]; do sleep 0.01; done; echo fatal: admin server did not become ready; exit 3"}, nil, dir, filepath.Join(dir, "crash.log"))
	if err != nil {
		t.Fatal(err)
	}
	crashed.Serving()
	if err := os.WriteFile(filepath.Join(dir, "served"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	<-crashed.done
	got := reports.String()
	for _, want := range []string{"exited without being stopped", "exit status 3", "fatal: admin server did not become ready", "crash.log"} {
		if !strings.Contains(got, want) {
			t.Errorf("report %q lacks %q", got, want)
		}
	}

	stopped, err := StartProcess("/bin/sleep", []string{"60"}, nil, dir, filepath.Join(dir, "stopped.log"))
	if err != nil {
		t.Fatal(err)
	}
	stopped.Serving()
	if err := stopped.Stop(); err != nil {
		t.Fatal(err)
	}
	if after := reports.String(); after != got {
		t.Errorf("a stopped process was reported: %q", strings.TrimPrefix(after, got))
	}
}

// weed mini's S3 port serves before its admin server binds; a start is ready
// only once the admin is, and an admin that could not bind is a port conflict.
// The lines are as weed wrote them in a suite where another process held the
// admin port (it exited two minutes after the first request had succeeded).
func TestWeedStartReadsTheAdminServer(t *testing.T) {
	const started = "  Admin        starting\nI1202 07:35:51.553156 admin.go:683 Starting SeaweedFS Admin Server on 127.0.0.1:25138\n"
	const bindFailed = started + "E1202 07:35:51.553395 mini.go:1990 Admin server error: admin server: listen tcp 127.0.0.1:25138: bind: address already in use\n  Admin        stopped   0.0s\n"
	const ready = started + "  Admin        ready     1.2s\n"

	if weedAdminReady(started) || weedStartFailure(started) != nil {
		t.Errorf("a starting admin: ready %v, failure %v; want neither", weedAdminReady(started), weedStartFailure(started))
	}
	if !weedAdminReady(ready) || weedStartFailure(ready) != nil {
		t.Errorf("a ready admin: ready %v, failure %v; want ready", weedAdminReady(ready), weedStartFailure(ready))
	}
	err := weedStartFailure(bindFailed)
	if weedAdminReady(bindFailed) || err == nil || !strings.Contains(err.Error(), "Admin server error") {
		t.Fatalf("an admin that could not bind: ready %v, failure %v; want the admin's error", weedAdminReady(bindFailed), err)
	}
	if !errors.Is(err, errBindConflict) {
		t.Errorf("%v is no bind conflict, so the start would not be retried on fresh ports", err)
	}
}
