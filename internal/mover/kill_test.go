package mover_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestMoverKilledMidLargeObjectResumes runs `bucketkeeper mover` as a process and
// kills it with SIGKILL in the middle of a 40 MiB multipart object: three of its parts
// are on the target, the next ones held by a proxy in front of it. Run again, the
// mover finishes the pass verified, keeps the parts already sent (checked against the
// source's bytes) and sends the target less than 1.2 times the bucket's size in all.
func TestMoverKilledMidLargeObjectResumes(t *testing.T) {
	bin := moverBinary(t)
	objs := mixedObjects("small", 51, []object{{key: "large/40mib.bin", size: 40 << 20, partSize: 5 << 20,
		meta: objectMeta{contentType: "application/zip"}, tags: map[string]string{"kind": "archive"}}})
	src, tgt := newBucket(t, seaweed, false), newBucket(t, rgw, false)
	src.putAll(t, objs)
	proxy := newCountingProxy(t, rgw.Endpoint)
	proxy.holdPartsAfter(3)

	id := moveID(t)
	t.Cleanup(func() { _ = checkpoints().Delete(context.Background(), id) })
	target := bucketOf(tgt)
	target.Endpoint = proxy.URL
	spec := mover.Spec{MoveID: id, Mode: mover.ModeFinal, Pass: 1, Source: bucketOf(src), Target: target,
		Limits: mover.Limits{Concurrency: 4, CheckpointInterval: mover.Duration{Duration: time.Second}}}
	dir := moverFiles(t, spec, src.srv, tgt.srv)

	first := startMover(t, bin, dir, "first.log")
	eventually(t, 2*time.Minute, "three parts on the target, the next held, the upload in the checkpoint", func() error {
		_, done, held := proxy.counts()
		cp, err := checkpoints().Load(context.Background(), id, 0)
		switch {
		case err != nil:
			return err
		case done < 3 || held < 1:
			return fmt.Errorf("%d parts done, %d held", done, held)
		case cp == nil || len(cp.Uploads) != 1:
			return errors.New("no upload in the checkpoint yet")
		}
		return nil
	})
	first.Kill()
	proxy.letGo()
	killedAt, _, _ := proxy.counts()
	t.Logf("killed the mover (PID %d) with %d bytes sent to the target", first.PID(), killedAt)

	second := startMover(t, bin, dir, "second.log")
	select {
	case <-second.Done():
	case <-time.After(3 * time.Minute):
		t.Fatal("the second mover did not finish within 3 minutes")
	}
	if err := second.Err(); err != nil {
		t.Fatalf("second mover: %v\n%s", err, testenv.Tail(readFile(filepath.Join(dir, "second.log")), 4000))
	}
	cp, err := checkpoints().Load(context.Background(), id, 0)
	if err != nil || cp == nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if !cp.Verified || cp.Runs != 2 || len(cp.Uploads) != 0 {
		t.Fatalf("checkpoint after the second run: verified %v, runs %d, uploads %d", cp.Verified, cp.Runs, len(cp.Uploads))
	}
	if log := readFile(filepath.Join(dir, "second.log")); !regexp.MustCompile(`"partsKept":\s*3\b`).MatchString(log) {
		t.Errorf("the second mover did not keep the 3 parts on the target:\n%s", testenv.Tail(log, 3000))
	}
	expectObjects(t, tgt, objs)
	sent, _, _ := proxy.counts()
	ratio := float64(sent) / float64(totalSize(objs))
	t.Logf("bytes sent to the target: %d for a bucket of %d (%.3f×)", sent, totalSize(objs), ratio)
	if ratio >= 1.2 {
		t.Errorf("the mover sent %.2f× the bucket's size to the target, want under 1.2×", ratio)
	}
}

var (
	binBuilt = make(chan struct{})
	binPath  string
	binErr   error
)

// buildBinary builds the operator's binary in the background: TestMain starts it
// beside the servers' starts, and moverBinary waits for it.
func buildBinary() {
	defer close(binBuilt)
	root, err := testenv.RepoRoot()
	if err != nil {
		binErr = err
		return
	}
	dir, err := os.MkdirTemp("", "bucketkeeper-mover-bin-")
	if err != nil {
		binErr = err
		return
	}
	binPath = filepath.Join(dir, "bucketkeeper")
	cmd := exec.Command("go", "build", "-o", binPath, "./cmd/bucketkeeper")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		binErr = fmt.Errorf("go build ./cmd/bucketkeeper: %v\n%s", err, out)
	}
}

// moverBinary is the operator's binary, built once per test run.
func moverBinary(t *testing.T) string {
	t.Helper()
	<-binBuilt
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// moverFiles writes what a mover Job mounts (the spec, the credentials, one file per
// key) and a kubeconfig into a temporary directory.
func moverFiles(t *testing.T, spec mover.Spec, src, tgt *testenv.S3Server) string {
	t.Helper()
	dir := t.TempDir()
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "spec.json"), data, 0o600))
	creds := filepath.Join(dir, "credentials")
	must(os.Mkdir(creds, 0o700))
	for name, value := range mover.CredentialsData(credentialsOf(src), credentialsOf(tgt)) {
		must(os.WriteFile(filepath.Join(creds, name), value, 0o600))
	}
	must(cp.WriteKubeconfig(filepath.Join(dir, "kubeconfig")))
	return dir
}

// startMover runs the mover subcommand on dir's files; it is stopped by PID when the
// test ends.
func startMover(t *testing.T, bin, dir, logName string) *testenv.Process {
	t.Helper()
	p, err := testenv.StartProcess(bin, []string{"mover", "--spec", filepath.Join(dir, "spec.json"),
		"--credentials", filepath.Join(dir, "credentials"), "--kubeconfig", filepath.Join(dir, "kubeconfig"),
		"--checkpoint-namespace", checkpointNamespace, "--shard", "0"}, nil, dir, filepath.Join(dir, logName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	})
	return p
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
