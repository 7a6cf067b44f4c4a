package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/bucketkeeper/bucketkeeper/internal/mover"
)

// Where a mover Job mounts its spec (a ConfigMap) and its credentials (a Secret).
const (
	defaultMoverSpec        = "/etc/bucketkeeper/mover/spec/spec.json"
	defaultMoverCredentials = "/etc/bucketkeeper/mover/credentials"
	serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
)

// runMover is `bucketkeeper mover`: one shard of one pass of a move, as a pod of a
// mover Job runs it. The spec and the credentials come from files (mounted from a
// ConfigMap and a Secret of the operator's namespace), never from the command line,
// and the checkpoint goes to a ConfigMap of that namespace. It exits 0 once the pass
// is done for the shard (the checkpoint says how it went), 1 when it stopped early
// (the Job runs it again, and it resumes), 2 on a spec it cannot run.
func runMover(args []string) int {
	fs := flag.NewFlagSet("mover", flag.ContinueOnError)
	specFile := fs.String("spec", defaultMoverSpec, "JSON file holding the pass to run (mover.Spec).")
	credentials := fs.String("credentials", defaultMoverCredentials, "Directory holding the stores' keys, one file each ("+mover.CredentialsSourceAccessKeyID+", ...).")
	shard := fs.Int("shard", -1, "Shard to run (default: $JOB_COMPLETION_INDEX, the pod's index in an Indexed Job, else 0).")
	namespace := fs.String("checkpoint-namespace", "", "Namespace of the checkpoint ConfigMaps (default: $POD_NAMESPACE, else the service account's).")
	kubeconfig := fs.String("kubeconfig", "", "Kubeconfig file (default: in-cluster configuration, or $KUBECONFIG).")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("mover")
	fail := func(code int, err error) int {
		log.Error(err, "mover stopped")
		return code
	}

	spec, err := mover.ReadSpecFile(*specFile)
	if err != nil {
		return fail(2, err)
	}
	if *shard < 0 {
		*shard = 0
		if v := os.Getenv("JOB_COMPLETION_INDEX"); v != "" {
			if *shard, err = strconv.Atoi(v); err != nil {
				return fail(2, fmt.Errorf("JOB_COMPLETION_INDEX %q: %w", v, err))
			}
		}
	}
	if *namespace == "" {
		*namespace = os.Getenv("POD_NAMESPACE")
	}
	if *namespace == "" {
		b, err := os.ReadFile(serviceAccountNamespace)
		if err != nil {
			return fail(2, errors.New("no --checkpoint-namespace, $POD_NAMESPACE or service account namespace"))
		}
		*namespace = strings.TrimSpace(string(b))
	}
	source, target, err := mover.ReadCredentialsDir(*credentials)
	if err != nil {
		return fail(2, err)
	}
	// The runtime's soft limit keeps the heap near what the mover needs (doc.go's
	// figure) instead of twice the live heap; GOMEMLIMIT, when the Job sets it from
	// the pod's limit, wins.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(mover.MemoryBound(spec.Limits))
	}

	var cfg *rest.Config
	if *kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
	} else {
		cfg, err = ctrl.GetConfig()
	}
	if err != nil {
		return fail(2, err)
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return fail(2, err)
	}
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fail(2, err)
	}
	ctx := ctrl.SetupSignalHandler()
	stores, err := mover.NewStores(ctx, spec, source, target, nil, nil)
	if err != nil {
		return fail(2, err)
	}
	writer, _ := os.Hostname()
	err = mover.RunShard(ctx, spec, *shard, stores, mover.Options{
		Checkpoints: &mover.ConfigMapCheckpoints{Client: k8s, Namespace: *namespace},
		Writer:      writer,
		Log:         log,
	})
	if err != nil {
		return fail(1, err)
	}
	return 0
}
