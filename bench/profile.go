package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// profileCPU records the manager's CPU profile over d (through its pprof endpoint) into
// path, for `go tool pprof -top`. The returned channel yields the outcome once the
// profile is written; a failed profile never fails the scenario that asked for it.
func (m *manager) profileCPU(path string, d time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		client := &http.Client{Timeout: d + 30*time.Second}
		resp, err := client.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", m.pprofAddr, int(d.Seconds())))
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		done <- err
	}()
	return done
}
