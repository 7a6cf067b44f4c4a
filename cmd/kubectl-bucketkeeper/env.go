package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// publicKeys are the Secret keys whose values env lists when asked for neither a
// command nor export lines: where the bucket is and which key it is, never the key's
// secret or a session token.
var publicKeys = map[string]bool{
	bkv1.SecretKeyBucketName: true, bkv1.AccessSecretKeyBucketNames: true, bkv1.SecretKeyBucketRegion: true,
	bkv1.SecretKeyBucketEndpoint: true, bkv1.SecretKeyBucketHost: true, bkv1.SecretKeyBucketPort: true,
	bkv1.SecretKeyForcePathStyle: true, bkv1.SecretKeyAWSRegion: true, bkv1.SecretKeyAWSEndpointS3: true,
	bkv1.SecretKeyAWSAccessKeyID: true,
}

// envName is what a shell accepts as a variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

type envOptions struct {
	*options
	export bool
	// skipEndpointCheck uses a Secret whose store cannot be read, so whose endpoint
	// cannot be checked.
	skipEndpointCheck bool
	// environ is the environment the command inherits: os.Environ, but for tests.
	environ func() []string
}

func newEnvCommand(parent *options) *cobra.Command {
	o := &envOptions{options: parent, environ: os.Environ}
	cmd := &cobra.Command{
		Use:   "env STORAGEBUCKET|bucketaccess/NAME [-- COMMAND [ARGS...]]",
		Short: "Run a command with an access's Secret as its environment",
		Long: `env runs COMMAND with the values of a Secret bucketkeeper wrote as environment
variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL_S3, AWS_REGION,
BUCKET_NAME, ...), so that the aws CLI or an SDK reaches the bucket with that key alone.
The command inherits this shell's environment without its AWS_* and BUCKET_* variables:
a profile or session token of yours never mixes with the Secret's key. A CA bundle in
the Secret is written to a private temporary file for the command's AWS_CA_BUNDLE and
removed after it.

Anyone who may write Secrets in the namespace can change the Secret, so env takes from
it only the keys bucketkeeper writes there (others are left out, and named), and uses
it only when its endpoint and CA bundle are those of the ObjectStore the bucket lives
on. If you may not read that ObjectStore, env refuses unless --skip-endpoint-check
says to use the endpoint unchecked.

For a BucketAccess the Secret is its spec.secretName. For a StorageBucket it is the
Secret of the BucketAccess that grants it (its own, with spec.access, or the only one),
else its connection Secret when the store hands out a shared key.

No value is printed: without a command env lists the variables, hiding the secret ones.
--export prints shell export lines, secret included, for eval.`,
		Example: `  kubectl bucketkeeper env photos -- aws s3 ls
  kubectl bucketkeeper env bucketaccess/photos-reader -- sh -c 'aws s3 cp README.md "s3://$BUCKET_NAME/" --endpoint-url "$AWS_ENDPOINT_URL_S3"'
  eval "$(kubectl bucketkeeper env photos --export)"`,
		Args: cobra.MinimumNArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if cmd.ArgsLenAtDash() >= 0 {
				return nil, cobra.ShellCompDirectiveDefault // the command's own words
			}
			return completeNames(parent, kindStorageBucket, kindBucketAccess)(cmd, args, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var command []string
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				args, command = args[:dash], args[dash:]
			}
			if len(args) != 1 {
				return fmt.Errorf("want one StorageBucket or bucketaccess/NAME, then the command after --: %s env photos -- aws s3 ls", cmd.Root().DisplayName())
			}
			if o.export && len(command) > 0 {
				return errors.New("--export prints export lines; it takes no command")
			}
			return o.run(cmd.Context(), args[0], command)
		},
	}
	cmd.Flags().BoolVar(&o.export, "export", false, "Print shell export lines (with the secret values) instead of running a command")
	cmd.Flags().BoolVar(&o.skipEndpointCheck, "skip-endpoint-check", false,
		"Use the Secret's endpoint when the ObjectStore cannot be read to check it (an endpoint that differs from a readable store's is refused all the same)")
	return cmd
}

func (o *envOptions) run(ctx context.Context, arg string, command []string) error {
	c, t, err := o.target(arg, kindStorageBucket, kindStorageBucket, kindBucketAccess)
	if err != nil {
		return err
	}
	secret, err := secretFor(ctx, c, t)
	if err != nil {
		return err
	}
	data, err := o.vet(ctx, c, secret)
	if err != nil {
		return err
	}
	switch {
	case o.export:
		return o.printExports(data)
	case len(command) == 0:
		return o.listVariables(secret.Secret, data)
	}
	return o.runCommand(data, command)
}

// envSecret is the Secret env uses and what the operator wrote it for.
type envSecret struct {
	*corev1.Secret
	// listed are the keys the operator writes into a Secret of its kind.
	listed []string
	// store is the ObjectStore the claim or access lives on ("" when not known), whose
	// endpoint the Secret must name.
	store string
}

// secretFor finds the Secret with the key for t and checks that it is the one the
// operator wrote for it: a Secret of that name that someone else made is never used.
func secretFor(ctx context.Context, c client.Client, t target) (*envSecret, error) {
	var owner client.Object
	var ba *bkv1.BucketAccess
	var name, what, store string
	switch t.kind {
	case kindBucketAccess:
		ba = &bkv1.BucketAccess{}
		if err := get(ctx, c, t, ba); err != nil {
			return nil, err
		}
		what = "BucketAccess " + ba.Name
	default:
		sb := &bkv1.StorageBucket{}
		if err := get(ctx, c, t, sb); err != nil {
			return nil, err
		}
		var err error
		if ba, err = accessFor(ctx, c, sb); err != nil {
			return nil, err
		}
		if ba != nil {
			what = "BucketAccess " + ba.Name + " (of StorageBucket " + sb.Name + ")"
		} else {
			owner, name, what, store = sb, connectionSecretName(sb), "StorageBucket "+sb.Name+"'s connection", sb.HomeStore()
		}
	}
	listed := bkv1.ConnectionSecretKeys
	if ba != nil {
		if ba.Spec.ServiceAccountName != "" {
			return nil, fmt.Errorf("%s is keyless (spec.serviceAccountName %s): its Secret holds no key, only what a Pod of that ServiceAccount needs to assume its role", what, ba.Spec.ServiceAccountName)
		}
		var err error
		if store, err = storeOfAccess(ctx, c, ba); err != nil {
			return nil, err
		}
		owner, name, listed = ba, ba.Spec.SecretName, bkv1.AccessSecretKeys
	}
	secret := &corev1.Secret{}
	err := c.Get(ctx, types.NamespacedName{Namespace: t.namespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("the Secret %s/%s of %s does not exist%s", t.namespace, name, what, notReady(ctx, c, owner))
	}
	if err != nil {
		return nil, err
	}
	if !metav1.IsControlledBy(secret, owner) {
		return nil, fmt.Errorf("Secret %s/%s was not written for %s by bucketkeeper; it is not used", t.namespace, name, what)
	}
	if len(secret.Data[bkv1.SecretKeyAWSSecretKey]) == 0 {
		hint := "; no BucketAccess grants the bucket: set spec.access (on a store with accessProvider IAM) or create a BucketAccess"
		if _, isAccess := owner.(*bkv1.BucketAccess); isAccess {
			hint = notReady(ctx, c, owner)
		}
		return nil, fmt.Errorf("the Secret %s/%s of %s holds no key%s", t.namespace, name, what, hint)
	}
	return &envSecret{Secret: secret, listed: listed, store: store}, nil
}

// accessFor picks the BucketAccess whose Secret env uses for a StorageBucket: the one
// spec.access made, else the only one that grants it; nil when none does.
func accessFor(ctx context.Context, c client.Client, sb *bkv1.StorageBucket) (*bkv1.BucketAccess, error) {
	r := newReader(c)
	grants, err := r.accessesOf(ctx, sb)
	if err != nil {
		return nil, err
	}
	var names []string
	for i := range grants {
		if metav1.IsControlledBy(&grants[i], sb) {
			return &grants[i], nil
		}
		names = append(names, "bucketaccess/"+grants[i].Name)
	}
	switch len(grants) {
	case 0:
		return nil, nil
	case 1:
		return &grants[0], nil
	}
	return nil, fmt.Errorf("%d BucketAccesses grant StorageBucket %s; name one: %s", len(grants), sb.Name, strings.Join(names, ", "))
}

// notReady says, for an error message, why owner has no usable Secret: its Ready
// condition when that is not True ("" otherwise).
func notReady(ctx context.Context, c client.Client, owner client.Object) string {
	var conds []metav1.Condition
	switch o := owner.(type) {
	case *bkv1.BucketAccess:
		conds = o.Status.Conditions
	case *bkv1.StorageBucket:
		conds = o.Status.Conditions
	}
	ready := apimeta.FindStatusCondition(conds, bkv1.ConditionReady)
	switch {
	case ready == nil:
		return ": it has no status yet"
	case ready.Status == metav1.ConditionTrue:
		return ""
	}
	return fmt.Sprintf(": it is not Ready (%s: %s); kubectl bucketkeeper why says what to do", ready.Reason, ready.Message)
}

// commandEnv is the command's environment: base without AWS_* and BUCKET_* variables
// (a profile, session token or endpoint of the caller's would change what the key
// does), then data: the Secret's listed keys (vet), no other.
func commandEnv(base []string, data map[string][]byte) []string {
	var env []string
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "AWS_") || strings.HasPrefix(name, "BUCKET_") || data[name] != nil {
			continue
		}
		env = append(env, kv)
	}
	for _, k := range sortedKeys(data) {
		env = append(env, k+"="+string(data[k]))
	}
	return env
}

// runCommand runs command with data, the Secret's vetted keys, as its environment.
func (o *envOptions) runCommand(data map[string][]byte, command []string) error {
	env := commandEnv(o.environ(), data)
	if pem := data[bkv1.SecretKeyCABundle]; len(pem) > 0 {
		dir, err := os.MkdirTemp("", "kubectl-bucketkeeper-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "ca.pem")
		if err := os.WriteFile(path, pem, 0o600); err != nil {
			return err
		}
		env = append(env, "AWS_CA_BUNDLE="+path)
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, o.streams.In, o.streams.Out, o.streams.ErrOut
	// Ctrl-C reaches the command from the terminal; the plugin waits for it to end
	// instead of dying first. A SIGTERM sent to the plugin is passed on.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-signals:
				if s == syscall.SIGTERM {
					_ = cmd.Process.Signal(s)
				}
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code := exit.ExitCode()
		if code < 0 {
			code = 128 + int(exit.Sys().(syscall.WaitStatus).Signal())
		}
		return &exitError{code: code}
	}
	return err
}

// printExports writes export lines of data, the Secret's vetted keys, for a shell's
// eval, and unset lines for the caller's AWS_* and BUCKET_* variables data does not
// set. Every value is quoted for a POSIX shell; every name is a variable name.
func (o *envOptions) printExports(data map[string][]byte) error {
	var b strings.Builder
	var unset []string
	for _, kv := range o.environ() {
		name, _, _ := strings.Cut(kv, "=")
		if (strings.HasPrefix(name, "AWS_") || strings.HasPrefix(name, "BUCKET_")) && data[name] == nil && envName.MatchString(name) {
			unset = append(unset, name)
		}
	}
	sort.Strings(unset)
	for _, name := range unset {
		fmt.Fprintf(&b, "unset %s\n", name)
	}
	for _, k := range sortedKeys(data) {
		if envName.MatchString(k) {
			fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(string(data[k])))
		}
	}
	_, err := fmt.Fprint(o.streams.Out, b.String())
	return err
}

// listVariables names the variables a command would get, with the values of the
// public ones only, quoted when they hold more than letters, digits and punctuation
// of URLs.
func (o *envOptions) listVariables(secret *corev1.Secret, data map[string][]byte) error {
	var b strings.Builder
	for _, k := range sortedKeys(data) {
		if publicKeys[k] {
			fmt.Fprintf(&b, "%s=%s\n", k, displayValue(string(data[k])))
		} else {
			fmt.Fprintf(&b, "%s=(hidden, %d bytes)\n", k, len(data[k]))
		}
	}
	fmt.Fprint(o.streams.Out, b.String())
	fmt.Fprintf(o.streams.ErrOut, "From Secret %s/%s. Run a command with them: %s env ... -- COMMAND\n", secret.Namespace, secret.Name, "kubectl bucketkeeper")
	return nil
}

func sortedKeys(data map[string][]byte) []string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// shellQuote quotes s for a POSIX shell: in single quotes, each quote inside closing
// the quoting, escaped, and opening it again. Inside single quotes nothing is special
// but the quote itself: no expansion, no substitution, newlines kept.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// plainValue is a value listVariables prints as it is.
var plainValue = regexp.MustCompile(`^[A-Za-z0-9_./:,=@+%-]+$`)

// displayValue is v as listVariables prints it: as it is when plain, else quoted as
// for a shell.
func displayValue(v string) string {
	if plainValue.MatchString(v) {
		return v
	}
	return shellQuote(v)
}
