package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// hostileNames are variables a tenant adds to its access's Secret to run its code in the
// shell of whoever runs env on it: bash runs PROMPT_COMMAND before each prompt, expands
// PS4 (with SHELLOPTS=xtrace) before each command, and BASH_ENV (sh: ENV) when it
// starts; the dynamic loader loads LD_PRELOAD into every program. (bash ignores an
// inherited PS4 when it runs as root, as make test does; the others still run there.)
var hostileNames = []string{"PROMPT_COMMAND", "SHELLOPTS", "PS4", "BASH_ENV", "ENV", "LD_PRELOAD"}

// TestEnvOnAHostileSecret: a tenant edits its access's Secret (the access controls it,
// and the operator leaves it alone while the access is parked on a suspended claim),
// adding variables that run code in a shell and pointing its endpoint at the tenant's
// own host. A platform admin runs env on it as the docs show. With the alien endpoint
// env refuses: no command runs, no export is printed and no request reaches the
// tenant's host. With the store's endpoint back, the command (sh, bash, env) and the
// export evaluated by an interactive bash get only the keys the operator writes: the
// sentinel files the payloads would create stay absent and the variables unset.
func TestEnvOnAHostileSecret(t *testing.T) {
	f := newFixture(t, nil)
	photos := f.claim("photos")
	f.waitConditions(photos, "Ready=True/Ready")
	ba := &bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "evil"},
		Spec: bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{{Name: "photos"}}, SecretName: "evil-access"}}
	must(t, k8s.Create(f.ctx, ba))
	f.waitConditions(ba, "Ready=True/Ready")

	// Parked: the access also names a suspended claim, so it waits for it and does not
	// write its Secret again.
	f.claim("parked", func(sb *bkv1.StorageBucket) { sb.Spec.Suspend = true })
	must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "evil"}, ba))
	ba.Spec.Buckets = append(ba.Spec.Buckets, bkv1.BucketGrant{Name: "parked"})
	must(t, k8s.Update(f.ctx, ba))
	f.waitConditions(ba, "Ready=False/BucketNotReady")

	var alienRequests atomic.Int64
	alien := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		alienRequests.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer alien.Close()

	dir := t.TempDir()
	sentinel := func(name string) string { return filepath.Join(dir, "ran-"+name) }
	hostile := map[string]string{
		"PROMPT_COMMAND": "touch " + sentinel("PROMPT_COMMAND"),
		"SHELLOPTS":      "xtrace",
		"PS4":            "$(touch " + sentinel("PS4") + ")",
		"BASH_ENV":       "$(touch " + sentinel("BASH_ENV") + ")",
		"ENV":            "$(touch " + sentinel("ENV") + ")",
		"LD_PRELOAD":     filepath.Join(dir, "tenant.so"),
	}
	noSentinel := func(when string) {
		t.Helper()
		for _, name := range hostileNames {
			if _, err := os.Stat(sentinel(name)); err == nil {
				t.Errorf("%s: the tenant's %s payload ran", when, name)
			}
		}
	}
	secret := &corev1.Secret{}
	must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "evil-access"}, secret))
	key := string(secret.Data[bkv1.AccessSecretKeySecretKey])
	if key == "" || string(secret.Data[bkv1.AccessSecretKeyEndpoint]) != f.srv.Endpoint {
		t.Fatalf("Secret evil-access: no key, or not the store's endpoint: %v", secret.Data)
	}
	edit := func(endpoint string) {
		t.Helper()
		must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "evil-access"}, secret))
		for k, v := range hostile {
			secret.Data[k] = []byte(v)
		}
		secret.Data[bkv1.AccessSecretKeyEndpoint] = []byte(endpoint)
		must(t, k8s.Update(f.ctx, secret))
	}
	// stillHostile proves env was shown the tenant's Secret: the operator did not write
	// it again in between.
	stillHostile := func(endpoint string) {
		t.Helper()
		got := &corev1.Secret{}
		must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "evil-access"}, got))
		if string(got.Data["PS4"]) != hostile["PS4"] || string(got.Data[bkv1.AccessSecretKeyEndpoint]) != endpoint {
			t.Fatalf("the operator wrote the Secret again; the test proves nothing: %v", got.Data)
		}
	}
	bin := t.TempDir()
	must(t, testenv.AWSCLIWrapper(bin, bin))
	kubectlWrapper(t, bin, f.ns)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	// The tenant's endpoint: refused, whatever the command.
	edit(alien.URL)
	stillHostile(alien.URL)
	r := plugin(t, f.ns, "env", "ba/evil", "--", "sh", "-c", `echo the command ran; aws s3 ls "s3://$BUCKET_NAME/" --endpoint-url "$AWS_ENDPOINT_URL_S3"`)
	if r.code == 0 || strings.Contains(r.stdout, "the command ran") {
		t.Errorf("env ran a command with an endpoint that is not the store's\n%s", r)
	}
	r.contains(t, "env with the tenant's endpoint", bkv1.AccessSecretKeyEndpoint, "ObjectStore "+f.store, f.srv.Endpoint, "it is not used")
	r.holdsNoSecret(t, "env with the tenant's endpoint", key)
	r = plugin(t, f.ns, "env", "ba/evil", "--export")
	if r.code == 0 || r.stdout != "" {
		t.Errorf("env --export printed a Secret whose endpoint is not the store's\n%s", r)
	}
	r.holdsNoSecret(t, "env --export with the tenant's endpoint", key)
	if n := alienRequests.Load(); n > 0 {
		t.Errorf("%d requests reached the tenant's endpoint", n)
	}
	noSentinel("the tenant's endpoint")
	stillHostile(alien.URL)

	// The store's endpoint: the command runs, with the listed keys alone.
	edit(f.srv.Endpoint)
	stillHostile(f.srv.Endpoint)
	for _, shell := range []string{"sh", "bash"} {
		r = plugin(t, f.ns, "env", "ba/evil", "--", shell, "-c", `echo "ran with a key of ${#AWS_SECRET_ACCESS_KEY} bytes"`)
		if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("ran with a key of %d bytes", len(key))) {
			t.Errorf("env -- %s -c: want the command run with the key\n%s", shell, r)
		}
		r.contains(t, "env -- "+shell, "left out", "PROMPT_COMMAND")
		noSentinel("env -- " + shell + " -c")
	}
	r = plugin(t, f.ns, "env", "ba/evil", "--", "env")
	if r.code != 0 {
		t.Errorf("env -- env: want exit 0\n%s", r)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		name, _, _ := strings.Cut(line, "=")
		if _, bad := hostile[name]; bad {
			t.Errorf("env -- env: the command got the Secret's %s", name)
		}
	}
	if !strings.Contains(r.stdout, bkv1.AccessSecretKeySecretKey+"="+key+"\n") || !strings.Contains(r.stdout, bkv1.AccessSecretKeyEndpoint+"="+f.srv.Endpoint+"\n") {
		t.Errorf("env -- env: the command lacks the Secret's key or endpoint\n%s", r.stderr)
	}

	r = plugin(t, f.ns, "env", "ba/evil", "--export")
	for _, name := range hostileNames {
		if strings.Contains(r.stdout, name) {
			t.Errorf("env --export printed the Secret's %s\n%s", name, r.stdout)
		}
	}
	// The docs' eval, in an interactive bash: PROMPT_COMMAND would run before the next
	// prompt, BASH_ENV and PS4 in the bash it starts.
	ctx, cancel := context.WithTimeout(f.ctx, 2*time.Minute)
	defer cancel()
	shell := exec.CommandContext(ctx, "bash", "--norc", "--noprofile", "-i")
	shell.Dir, shell.Env = dir, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	shell.Stdin = strings.NewReader(`eval "$(kubectl bucketkeeper env bucketaccess/evil --export)"
printf 'after eval:%s|%s|%s|%s|%s|%s\n' "${#AWS_SECRET_ACCESS_KEY}" "${PROMPT_COMMAND-unset}" "${BASH_ENV-unset}" "${ENV-unset}" "${LD_PRELOAD-unset}" "$(export -p | grep -c 'PS4=')"
bash -c true
exit
`)
	var out, errOut bytes.Buffer
	shell.Stdout, shell.Stderr = &out, &errOut
	if err := shell.Run(); err != nil {
		t.Errorf("bash -i: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	if want := fmt.Sprintf("after eval:%d|unset|unset|unset|unset|0\n", len(key)); !strings.Contains(out.String(), want) {
		t.Errorf("eval of env --export in bash -i: want %q\n--- stdout\n%s--- stderr\n%s", want, out.String(), errOut.String())
	}
	noSentinel("eval of env --export in bash -i")
	stillHostile(f.srv.Endpoint)
}

// TestEnvForAUserWhoCannotReadTheStore: a tenant's Role (storagebuckets,
// bucketaccesses and Secrets of its namespace, no ObjectStores) lets env find the
// Secret but not check its endpoint against the store's. env refuses, runs nothing and
// says how to go on; with --skip-endpoint-check it runs the command and names the
// endpoint it could not check.
func TestEnvForAUserWhoCannotReadTheStore(t *testing.T) {
	f := newFixture(t, nil)
	photos := f.claim("photos", func(sb *bkv1.StorageBucket) { sb.Spec.Access = string(bkv1.AccessReadWrite) })
	f.waitConditions(photos, "Ready=True/Ready")
	f.waitConditions(&bkv1.BucketAccess{ObjectMeta: photos.ObjectMeta}, "Ready=True/Ready")
	tenant, err := testenv.ServiceAccountClient(f.ctx, k8s, cfg, operator.Scheme(), f.ns, "tenant", []rbacv1.PolicyRule{
		{APIGroups: []string{bkv1.GroupVersion.Group}, Resources: []string{"storagebuckets", "bucketaccesses"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	})
	must(t, err)
	// The API server's authorizer learns of the Role from its watch.
	must(t, testenv.Poll(f.ctx, func() error {
		return tenant.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "photos-access"}, &corev1.Secret{})
	}))
	if err := tenant.Get(f.ctx, types.NamespacedName{Name: f.store}, &bkv1.ObjectStore{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant reads the ObjectStore: %v", err)
	}
	asTenant := []string{"--as", "system:serviceaccount:" + f.ns + ":tenant",
		"--as-group", "system:serviceaccounts", "--as-group", "system:serviceaccounts:" + f.ns, "--as-group", "system:authenticated"}

	r := plugin(t, f.ns, append(asTenant, "env", "photos", "--", "sh", "-c", "echo the command ran")...)
	if r.code == 0 || strings.Contains(r.stdout, "the command ran") {
		t.Errorf("env ran a command with an endpoint it could not check\n%s", r)
	}
	r.contains(t, "env as the tenant", "cannot read ObjectStore "+f.store, "--skip-endpoint-check")
	r = plugin(t, f.ns, append(asTenant, "env", "photos", "--export")...)
	if r.code == 0 || r.stdout != "" {
		t.Errorf("env --export printed a Secret whose endpoint it could not check\n%s", r)
	}

	r = plugin(t, f.ns, append(asTenant, "env", "photos", "--skip-endpoint-check", "--", "sh", "-c", `echo "the command ran against $AWS_ENDPOINT_URL_S3"`)...)
	if r.code != 0 || !strings.Contains(r.stdout, "the command ran against "+f.srv.Endpoint) {
		t.Errorf("env --skip-endpoint-check: want the command run\n%s", r)
	}
	r.contains(t, "env --skip-endpoint-check", "not checked", f.srv.Endpoint)
}
