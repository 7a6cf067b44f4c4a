package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// defaultRequestTimeout bounds every request to the API server when --request-timeout
// is not given: kubectl waits for ever by default, and a plugin run from a script
// should not.
const defaultRequestTimeout = 30 * time.Second

// options are the flags every verb shares and what they build.
type options struct {
	streams genericiooptions.IOStreams
	config  *genericclioptions.ConfigFlags
	// allNamespaces (-A) lists across every namespace where a verb lists.
	allNamespaces bool
	// output is "" (text), "json" or "yaml", for the verbs that support -o.
	output string
	// color is "auto" (on a terminal, unless NO_COLOR is set), "always" or "never".
	color string
	// now is the clock ages are measured against; tests fix it.
	now func() time.Time

	kube client.Client
}

// exitError carries an exit code other than 1 (env passes on its command's) and, when
// msg is empty, prints nothing more: the command said it already.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// run is the plugin: main calls it with os.Args[1:], the tests with their own
// arguments and buffers. It returns the process's exit code.
func run(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	root := newRootCommand(streams)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var exit *exitError
	if errors.As(err, &exit) {
		if exit.msg != "" {
			fmt.Fprintln(streams.ErrOut, "error:", exit.msg)
		}
		return exit.code
	}
	fmt.Fprintln(streams.ErrOut, "error:", err)
	return 1
}

func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{streams: streams, config: genericclioptions.NewConfigFlags(true), now: time.Now}
	root := &cobra.Command{
		Use:   "kubectl-bucketkeeper",
		Short: "See a StorageBucket's whole story, and use its Secret, in one command",
		Long: `kubectl bucketkeeper shows what bucketkeeper made of your StorageBuckets and
BucketAccesses, says why one is not Ready and what to do about it, and runs commands
with an access's Secret as environment without printing it.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// kubectl runs the plugin as kubectl-bucketkeeper; its help and completion say
		// "kubectl bucketkeeper".
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl bucketkeeper"},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.config.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&o.color, "color", "auto", "Colour the output: auto (on a terminal, unless NO_COLOR is set), always or never")
	root.AddCommand(
		newTreeCommand(o),
		newWhyCommand(o),
		newEnvCommand(o),
		newProbeCommand(o),
		newStatusCommand(o),
		newAdoptCommand(o),
	)
	registerFlagCompletions(o, root)
	return root
}

// addListFlags adds -A and -o to a verb that lists.
func (o *options) addListFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List the objects of every namespace")
	o.addOutputFlag(cmd)
}

func (o *options) addOutputFlag(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml (text when empty)")
}

// validate checks the flags shared by the verbs before anything is asked of the
// API server.
func (o *options) validate() error {
	switch o.output {
	case "", "json", "yaml":
	default:
		return fmt.Errorf("--output %q: want json or yaml", o.output)
	}
	switch o.color {
	case "auto", "always", "never":
	default:
		return fmt.Errorf("--color %q: want auto, always or never", o.color)
	}
	return nil
}

// scheme holds the kinds the plugin reads: the API's, Secrets, Namespaces and Events.
func scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := bkv1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// client returns the API client the kubeconfig flags select, made on first use.
func (o *options) client() (client.Client, error) {
	if o.kube != nil {
		return o.kube, nil
	}
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultRequestTimeout
	}
	cfg.UserAgent = "kubectl-bucketkeeper"
	s, err := scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, err
	}
	o.kube = c
	return c, nil
}

// namespace is the namespace of the request: -n, else the kubeconfig context's, else
// "default", as kubectl decides it.
func (o *options) namespace() (string, error) {
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// listNamespace is the namespace a listing covers: "" (all) with -A.
func (o *options) listNamespace() (string, error) {
	if o.allNamespaces {
		return "", nil
	}
	return o.namespace()
}

// colour says whether to colour what goes to w.
func (o *options) colour(w io.Writer) bool {
	switch o.color {
	case "always":
		return true
	case "never":
		return false
	}
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := w.(*os.File)
	return ok && isTerminal(f)
}
