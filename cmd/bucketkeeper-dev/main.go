// Command bucketkeeper-dev runs bucketkeeper on a laptop with no cluster and no cloud
// account: a real etcd and kube-apiserver (test/testenv, the same harness the tests
// use), a real S3 server in this process (Versity S3 Gateway's embedgw, posix
// backend, with Versity's standalone IAM service beside it, so each sample gets a
// key of its own), and the operator's own manager (internal/operator, as the
// production binary builds it). It applies the sample StorageBuckets and prints a live table of
// their status; `kubectl --kubeconfig .bucketkeeper-dev/kubeconfig get sb` works
// alongside.
//
// It is its own Go module so that Versity's dependencies never enter the root
// module or the production binary.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// options are the command line.
type options struct {
	dataDir       string
	kubeconfig    string
	samples       string
	s3Port        int
	exitWhenReady bool
	timeout       time.Duration
	verbose       bool
}

const usageText = `bucketkeeper-dev runs bucketkeeper with no cluster and no cloud account.

It starts a real etcd and kube-apiserver (built by hack/peers/build.sh on first
use, ~5 min), a Versity S3 Gateway and its IAM service in this process on free
127.0.0.1 ports, and the operator; creates the ObjectStore "local" for that store
(access provider IAM); applies every StorageBucket in --samples; and prints a row
to stdout whenever a StorageBucket's status changes. A sample with spec.access
gets its own key, scoped to its bucket, in the Secret <name>-access. Progress goes to stderr; the operator's log goes to
bucketkeeper-dev.log in the data directory (or to stderr with -v).

While it runs:
  kubectl --kubeconfig .bucketkeeper-dev/kubeconfig get sb -A

Relative paths are taken from the repository root (make dev runs this from
cmd/bucketkeeper-dev). Ctrl-C stops everything.

Flags:
`

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("bucketkeeper-dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dataDir, "data-dir", "", "Keep etcd's data, the buckets' contents, the IAM users and the store's credentials and ports in `DIR` between runs, so a restart finds the same buckets and keys. Default: a fresh temporary directory removed on exit.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", filepath.Join(".bucketkeeper-dev", "kubeconfig"), "Write the kubeconfig for the dev cluster to `FILE` (rewritten on every start, removed on exit).")
	fs.StringVar(&o.samples, "samples", filepath.Join("config", "samples", "dev"), "Apply the StorageBuckets in `PATH`, a YAML file or a directory of them (ObjectStores there are skipped: the embedded store's replaces them).")
	fs.IntVar(&o.s3Port, "s3-port", 0, "Serve S3 on 127.0.0.1:`PORT`. Default: the port of the last run with this --data-dir if free, else any free port. The IAM API takes the port of the last run if free, else any free port.")
	fs.BoolVar(&o.exitWhenReady, "exit-when-ready", false, "Exit 0 once every sample is Ready=True and Available=True as decided by this run (a fresh probe) and every sample with spec.access has its key in its Secret, or 1 after --timeout, printing the conditions that are not.")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "With --exit-when-ready: how long to wait, from the moment the control plane is up (a first-run build of the peers does not count).")
	fs.BoolVar(&o.verbose, "v", false, "Also write the operator's log to stderr.")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if o.timeout <= 0 {
		return nil, errors.New("--timeout must be positive")
	}
	return o, nil
}

func main() {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bucketkeeper-dev:", err)
		os.Exit(2)
	}
	os.Exit(run(opts))
}

// progress prints one line about what the dev binary is doing to stderr, keeping
// stdout for the table.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bucketkeeper-dev: "+format+"\n", args...)
}

// resolve makes p absolute against the repository root. Every path must be absolute
// before the embedded store starts: Versity's posix backend chdirs the process.
func resolve(root, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}

// lockDataDir takes an exclusive lock on dir, so that a second instance on the same
// data fails at once instead of sharing etcd's data with the first. The kernel
// drops the lock when this process dies, however it dies.
func lockDataDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is in use by another bucketkeeper-dev (%v)", dir, err)
	}
	return f, nil
}

// announceBuild tells why the first start takes minutes.
func announceBuild(missing []string) {
	for _, p := range missing {
		switch p {
		case "kube-apiserver":
			progress("building kube-apiserver (first run only, ~5 min)…")
		case "etcd":
			progress("building etcd (first run only, ~1 min)…")
		default:
			progress("building %s (first run only)…", p)
		}
	}
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }
