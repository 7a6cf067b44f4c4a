package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestEveryVerbOnAReadyClaim: two claims with spec.access: ReadWrite on SeaweedFS,
// Ready, Available and keyed. tree shows the whole story, why finds nothing, probe gets
// a fresh verdict, status counts them, completion names them; and env runs the
// README's aws CLI recipe with nothing but the access's Secret: the upload and a
// listing work, the other claim's bucket is refused, and no output of the plugin or the
// CLI holds the secret key.
func TestEveryVerbOnAReadyClaim(t *testing.T) {
	f := newFixture(t, nil)
	withAccess := func(sb *bkv1.StorageBucket) { sb.Spec.Access = string(bkv1.AccessReadWrite) }
	photos, reports := f.claim("photos", withAccess), f.claim("reports", withAccess)
	for _, sb := range []*bkv1.StorageBucket{photos, reports} {
		f.waitConditions(sb, "Ready=True/Ready", "Available=True/ProbeSucceeded")
		f.waitConditions(&bkv1.BucketAccess{ObjectMeta: sb.ObjectMeta}, "Ready=True/Ready")
	}
	secret := &corev1.Secret{}
	must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "photos-access"}, secret))
	key := string(secret.Data[bkv1.AccessSecretKeySecretKey])
	if key == "" {
		t.Fatalf("Secret photos-access holds no key: %v", secret.Data)
	}
	secrets := []string{key, f.srv.SecretAccessKey}
	noSecret := func(what string, r result) { r.holdsNoSecret(t, what, secrets...) }

	t.Run("tree", func(t *testing.T) {
		r := plugin(t, f.ns, "tree", "photos")
		if r.code != 0 {
			t.Fatal(r)
		}
		r.contains(t, "tree", "StorageBucket/photos", "ObjectStore/"+f.store, "Bucket "+photos.Status.BucketName, "Secret/photos-bucket",
			"BucketAccess/photos", "Secret/photos-access", "ProbeSucceeded", f.ns+" allowed", "region: "+f.srv.Region,
			"Provisioned", "Configured", bkv1.AccessSecretKeySecretKey)
		if strings.Contains(r.stdout, "\x1b[") {
			t.Errorf("tree coloured output that is no terminal:\n%s", r)
		}
		noSecret("tree", r)

		r = plugin(t, f.ns, "tree", "photos", "-o", "json")
		var root node
		if err := json.Unmarshal([]byte(r.stdout), &root); err != nil || r.code != 0 {
			t.Fatalf("tree -o json: %v\n%s", err, r)
		}
		var kinds []string
		for _, c := range root.Children {
			kinds = append(kinds, c.Kind+"/"+c.Status)
		}
		if got, want := strings.Join(kinds, " "), "ObjectStore/True Bucket/True Secret/present BucketAccess/True"; got != want {
			t.Errorf("tree -o json: children %s, want %s", got, want)
		}

		r = plugin(t, "", "tree", "-A", "-o", "yaml")
		var all struct{ Items []node }
		if err := yaml.Unmarshal([]byte(r.stdout), &all); err != nil || r.code != 0 {
			t.Fatalf("tree -A -o yaml: %v\n%s", err, r)
		}
		found := 0
		for _, n := range all.Items {
			if n.Namespace == f.ns {
				found++
			}
		}
		if found != 2 {
			t.Errorf("tree -A: %d trees of namespace %s, want 2", found, f.ns)
		}
		if r := plugin(t, f.ns, "tree", "--color", "always", "photos"); !strings.Contains(r.stdout, "\x1b[32mTrue\x1b[0m") {
			t.Errorf("tree --color always: no green True\n%s", r)
		}
	})

	t.Run("why", func(t *testing.T) {
		r := plugin(t, f.ns, "why", "photos")
		if r.code != 0 {
			t.Fatal(r)
		}
		r.contains(t, "why", "StorageBucket "+f.ns+"/photos is fine")
		r = plugin(t, f.ns, "why", "ba/photos")
		r.contains(t, "why ba/photos", "BucketAccess "+f.ns+"/photos is fine")
		r = plugin(t, f.ns, "why")
		r.contains(t, "why (namespace)", "Every StorageBucket and BucketAccess in namespace "+f.ns+" is fine.")
	})

	t.Run("env", func(t *testing.T) {
		dir := t.TempDir()
		must(t, testenv.AWSCLIWrapper(dir, dir))
		t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		file := filepath.Join(dir, "README.md")
		must(t, os.WriteFile(file, []byte("from kubectl bucketkeeper env"), 0o600))

		// The README's line, as a user types it, and a listing after it.
		script := `aws s3 cp "$0" "s3://$BUCKET_NAME/" --endpoint-url "$AWS_ENDPOINT_URL_S3" && aws s3 ls "s3://$BUCKET_NAME/" --endpoint-url "$AWS_ENDPOINT_URL_S3"`
		r := plugin(t, f.ns, "env", "photos", "--", "sh", "-c", script, file)
		if r.code != 0 || !strings.Contains(r.stdout, "upload: ") || !strings.Contains(r.stdout, " README.md\n") {
			t.Errorf("env photos -- aws s3 cp, aws s3 ls: want exit 0, the upload and the listing\n%s", r)
		}
		noSecret("env, upload and listing", r)
		r = plugin(t, f.ns, "env", "ba/photos", "--", "aws", "s3", "ls", "s3://"+reports.Status.BucketName+"/", "--endpoint-url", f.srv.Endpoint)
		if r.code == 0 || !strings.Contains(r.stderr, "AccessDenied") {
			t.Errorf("env ba/photos -- aws s3 ls of the reports bucket: want AccessDenied and a failing exit\n%s", r)
		}
		noSecret("env, refused", r)
		if r := plugin(t, f.ns, "env", "photos", "--", "sh", "-c", "exit 7"); r.code != 7 {
			t.Errorf("env passes on the command's exit code: got %d\n%s", r.code, r)
		}

		// Without a command env names the variables and hides the secret ones; only
		// --export prints the key.
		r = plugin(t, f.ns, "env", "photos")
		r.contains(t, "env (list)", "BUCKET_NAME="+photos.Status.BucketName, "AWS_SECRET_ACCESS_KEY=(hidden")
		noSecret("env (list)", r)
		r = plugin(t, f.ns, "env", "photos", "--export")
		r.contains(t, "env --export", "export AWS_SECRET_ACCESS_KEY='"+key+"'")
	})

	t.Run("README tour", func(t *testing.T) {
		// The README's tour as a user types it, with the make dev sample's reports
		// bucket read as this test's.
		dir := t.TempDir()
		must(t, testenv.AWSCLIWrapper(dir, dir))
		kubectlWrapper(t, dir, f.ns)
		t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		must(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("the README's tour"), 0o600))
		tour := readmeTour(t)
		if len(tour) != 4 {
			t.Fatalf("README.md's tour has %d plugin commands, this test runs 4: %q", len(tour), tour)
		}
		r := runTourLine(t, dir, tour[0])
		r.contains(t, tour[0], "StorageBucket/photos", "Bucket "+photos.Status.BucketName, "Secret/photos-access")
		r = runTourLine(t, dir, tour[1])
		if r.code != 0 || !strings.Contains(r.stdout, "upload: ./README.md to s3://"+photos.Status.BucketName+"/README.md") || !strings.Contains(r.stdout, " README.md\n") {
			t.Errorf("%s: want exit 0, the upload and the listing\n%s", tour[1], r)
		}
		noSecret(tour[1], r)
		refused := strings.ReplaceAll(tour[2], "s3://dev-default-reports/", "s3://"+reports.Status.BucketName+"/")
		if refused == tour[2] {
			t.Fatalf("the tour's refused listing names no dev-default-reports: %s", tour[2])
		}
		if r = runTourLine(t, dir, refused); r.code == 0 || !strings.Contains(r.stderr, "AccessDenied") {
			t.Errorf("%s: want AccessDenied and a failing exit\n%s", refused, r)
		}
		noSecret(refused, r)
		r = runTourLine(t, dir, tour[3])
		r.contains(t, tour[3], "StorageBucket "+f.ns+"/photos is fine")
	})

	t.Run("probe", func(t *testing.T) {
		r := plugin(t, f.ns, "probe", "photos", "--timeout", "45s")
		if r.code != 0 {
			t.Fatal(r)
		}
		r.contains(t, "probe", "Available=True ProbeSucceeded")
		got := &bkv1.StorageBucket{}
		must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "photos"}, got))
		if got.Annotations[bkv1.AnnotationProbeRequestedAt] == "" || got.Status.LastHandledProbeRequest != got.Annotations[bkv1.AnnotationProbeRequestedAt] {
			t.Errorf("probe: annotation %q, handled %q", got.Annotations[bkv1.AnnotationProbeRequestedAt], got.Status.LastHandledProbeRequest)
		}
	})

	t.Run("status", func(t *testing.T) {
		r := plugin(t, "", "status", f.store)
		if r.code != 0 {
			t.Fatal(r)
		}
		r.contains(t, "status", "ObjectStore "+f.store+": Ready=True", "StorageBuckets: 2", "BucketAccesses: 2 (keys issued: 2, rotating: 0)")
		r = plugin(t, "", "status", "objectstore/"+f.store, "-o", "json")
		var st storeStatus
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("status -o json: %v\n%s", err, r)
		}
		if st.Totals.Buckets != 2 || st.Totals.Keys != 2 || len(st.Buckets) != 1 || st.Buckets[0].Count != 2 || st.Buckets[0].AvailableReason != bkv1.ReasonProbeSucceeded {
			t.Errorf("status -o json: %+v", st)
		}
	})

	t.Run("completion", func(t *testing.T) {
		r := plugin(t, f.ns, "__complete", "tree", "")
		r.contains(t, "completion of tree", "photos\n", "reports\n")
		r = plugin(t, f.ns, "__complete", "why", "bucketaccess/")
		r.contains(t, "completion of why bucketaccess/", "bucketaccess/photos\n")
		r = plugin(t, f.ns, "__complete", "status", "store-p")
		r.contains(t, "completion of status", f.store+"\n")
		r = plugin(t, "", "__complete", "tree", "-n", f.ns[:4])
		r.contains(t, "completion of -n", f.ns+"\n")
	})
}
