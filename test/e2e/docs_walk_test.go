package e2e_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/test/docs"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// dayOnePages are the pages a reader follows in order on one cluster, each with the
// placeholders a reader replaces: getting started makes the store, the team and the
// claim the others build on.
var dayOnePages = []struct {
	path   string
	values func() map[string]string
}{
	{"docs/getting-started.md", func() map[string]string {
		return map[string]string{
			"https://s3.example.com":                   seaweed.Endpoint,
			"REPLACE-WITH-THE-STORE-ACCESS-KEY-ID":     seaweed.AccessKeyID,
			"REPLACE-WITH-THE-STORE-SECRET-ACCESS-KEY": seaweed.SecretAccessKey,
		}
	}},
	{"docs/onboarding.md", nil},
	{"docs/application-teams.md", nil},
}

// TestDayOnePagesWork applies every YAML block of the day-one pages (all of them: none
// is marked as not meant to be applied) in the order a reader does, to a cluster of its
// own with the operator and SeaweedFS with its IAM API as the store getting started
// names, and waits for every object to be Current: the store, the team's namespaces,
// bindings and quota (kube-controller-manager's quota controller runs, as in a
// cluster), the claims and their keys. Workloads need a node, which this cluster has
// not: they are applied, and getting started's Job is run as its container would run
// it, its command with the aws CLI and nothing but the claim's Secret as environment;
// it must write and list the bucket.
func TestDayOnePagesWork(t *testing.T) {
	w := newWalk(t, operator.Options{})
	w.store("main", seaweed)
	startControllerManager(t, w.cfg, "resourcequota")
	root, err := testenv.RepoRoot()
	must(t, err)
	var jobs []*unstructured.Unstructured
	for _, page := range dayOnePages {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page.path)))
		must(t, err)
		text := string(data)
		if page.values != nil {
			text = substitute(t, page.path, text, page.values())
		}
		_, blocks := docs.Page{Path: page.path, Text: text}.Split()
		var objs []*unstructured.Unstructured
		for _, b := range blocks {
			if b.Info != "yaml" {
				continue
			}
			if strings.HasPrefix(b.Before, docs.NotAppliedMarker) {
				t.Errorf("%s:%d: a block marked not to be applied on a page a reader follows step by step", page.path, b.N)
				continue
			}
			objs = append(objs, decodeObjects(t, page.path, b.Body)...)
		}
		if len(objs) == 0 {
			t.Fatalf("%s: no YAML to apply", page.path)
		}
		// In the page's order, as a reader applies them.
		for _, o := range objs {
			w.apply([]*unstructured.Unstructured{o})
			if o.GetKind() == "Job" {
				jobs = append(jobs, o)
			}
		}
		w.waitCurrent(objs, 3*time.Minute)
	}
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs on the day-one pages, want getting started's one", len(jobs))
	}
	out := w.runContainer(jobs[0])
	bucket := w.storageBucket("team-a", "photos").Status.BucketName
	if !strings.Contains(out, "upload: ") || !strings.Contains(out, "hello.txt") {
		t.Errorf("the Job's command wrote or listed nothing:\n%s", out)
	}
	got, err := w.stores["main"].GetObject(w.ctx, bucket, "hello.txt", 1024)
	if err != nil || string(got) != "hello from team-a\n" {
		t.Errorf("hello.txt on the store: %q, %v", got, err)
	}
}

// runContainer runs the first container of a workload as its image would, here: its
// `sh -c` command, with the aws CLI on the PATH and, as environment, the keys of the
// Secrets its envFrom names and nothing else of this process's. It returns the output.
func (w *walk) runContainer(o *unstructured.Unstructured) string {
	w.t.Helper()
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		w.t.Fatalf("%s %s has no container", o.GetKind(), o.GetName())
	}
	c := containers[0].(map[string]any)
	command, _, _ := unstructured.NestedStringSlice(c, "command")
	if len(command) != 3 || command[0] != "sh" || command[1] != "-c" {
		w.t.Fatalf("%s %s: command %q, want [sh -c SCRIPT]", o.GetKind(), o.GetName(), command)
	}
	dir := w.t.TempDir()
	bin, home := filepath.Join(dir, "bin"), filepath.Join(dir, "home")
	must(w.t, os.MkdirAll(bin, 0o755))
	must(w.t, os.MkdirAll(home, 0o700))
	must(w.t, testenv.AWSCLIWrapper(bin, home))
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + home}
	envFrom, _, _ := unstructured.NestedSlice(c, "envFrom")
	for _, e := range envFrom {
		name, _, _ := unstructured.NestedString(e.(map[string]any), "secretRef", "name")
		for k, v := range w.secret(o.GetNamespace(), name) {
			env = append(env, k+"="+string(v))
		}
	}
	cmd := exec.CommandContext(w.ctx, "sh", "-c", command[2])
	cmd.Env, cmd.Dir = env, dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		w.t.Fatalf("%s %s's command: %v\n%s", o.GetKind(), o.GetName(), err, out.String())
	}
	return out.String()
}
