package mover_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bucketkeeper/bucketkeeper/internal/awspolicy"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// The suite runs one real control plane (the checkpoints are ConfigMaps) and one
// SeaweedFS, one Versity and one Ceph RGW server; each test makes its own buckets and
// moves, and deletes them. Tests run one after another: the outage test stops a
// server the others use.
var (
	k8s     client.Client
	cp      *testenv.ControlPlane
	seaweed *testenv.S3Server
	versity *testenv.S3Server
	rgw     *testenv.S3Server
)

// checkpointNamespace stands for the operator's namespace.
const checkpointNamespace = "bucketkeeper-system"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	go buildBinary() // for the kill test, while the servers start
	defer func() {
		<-binBuilt
		if binPath != "" {
			_ = os.RemoveAll(filepath.Dir(binPath))
		}
	}()
	// The servers start side by side: most of each start is waiting.
	var wg sync.WaitGroup
	var errs [4]error
	servers := map[testenv.S3Kind]**testenv.S3Server{testenv.SeaweedFS: &seaweed, testenv.Versity: &versity, testenv.RGW: &rgw}
	i := 0
	for kind, into := range servers {
		idx := i
		wg.Go(func() { *into, errs[idx] = testenv.StartS3(kind) })
		i++
	}
	wg.Go(func() { cp, errs[3] = testenv.StartControlPlane() })
	wg.Wait()
	defer func() {
		for _, s := range []*testenv.S3Server{seaweed, versity, rgw} {
			if s != nil {
				if err := s.Close(); err != nil {
					fmt.Fprintf(os.Stderr, "stopping %s: %v\n", s.Kind, err)
				}
			}
		}
		if cp != nil {
			if err := cp.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
			}
		}
	}()
	if err := errors.Join(errs[:]...); err != nil {
		return fail(err)
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return fail(err)
	}
	var err error
	if k8s, err = client.New(cp.Config, client.Options{Scheme: scheme}); err != nil {
		return fail(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: checkpointNamespace}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		return fail(err)
	}
	code := m.Run()
	for _, missing := range moveRequests.Missing() {
		fmt.Fprintf(os.Stderr, "FAIL: a move sent %s (add the action to internal/awspolicy, then make docs)\n", missing)
		code = 1
	}
	return code
}

// moveRequests records every request the moves of the suite's fixtures send, which must all
// be ones whose AWS actions internal/awspolicy lists.
var moveRequests = &awspolicy.Recorder{}

// recordedFactory is s3.New, its clients recording into moveRequests.
func recordedFactory(ctx context.Context, cfg s3.Config) (s3.Client, error) {
	cfg.APIOptions = append(slices.Clip(cfg.APIOptions), moveRequests.Middleware)
	return s3.New(ctx, cfg)
}

// checkpoints is the suite's checkpoint store.
func checkpoints() *mover.ConfigMapCheckpoints {
	return &mover.ConfigMapCheckpoints{Client: k8s, Namespace: checkpointNamespace}
}

// moveID is a fresh move ID for the test.
func moveID(t *testing.T) string {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 28 {
		name = name[len(name)-28:]
	}
	return strings.Trim(name, "-") + "-" + randomHex(4)
}

// waitPass waits until every shard of the move's pass is done, and returns the pass's
// progress. It fails the test with the checkpoints' state after timeout.
func waitPass(t *testing.T, r mover.Runner, id string, pass, shards int, timeout time.Duration) mover.Progress {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var p mover.Progress
	var err error
	for {
		p, err = r.Progress(ctx, id, pass, shards)
		if err == nil && p.Done == shards {
			return p
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pass %d of move %s not done after %s: %+v (%v)", pass, id, timeout, p, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// eventually retries f until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
