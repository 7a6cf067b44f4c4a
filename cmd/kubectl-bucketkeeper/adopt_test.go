package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/quota"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// adoptCase is one bucket made by hand before adopt runs, and the spec adopt must give
// it: what the bucket has, said the way a StorageBucket says it.
type adoptCase struct {
	name string
	want bkv1.StorageBucketSpec
}

// TestAdoptAStoresUnownedBuckets runs adopt on a SeaweedFS (the suite's) and on a MinIO
// (a server of its own), side by side on the suite's API server and operator. Each
// store, reached through a proxy that names every write, holds 20 unowned buckets with
// varied settings of what it keeps (versioning enabled or suspended, lifecycle rules,
// tags, a policy, object lock with a default retention on one; on SeaweedFS also CORS,
// no public-access block on some and a quota on one), one bucket a StorageBucket owns,
// one no namespace rule maps and one no claim of this cluster may take: another
// account's on SeaweedFS, another cluster's on MinIO. adopt writes 20 manifests, one
// file per bucket under --dir (and the same on stdout), with each bucket's settings in
// its spec; it skips the three and says why; and no write reaches the store while it
// reads. Applied, with the store's guardrails allowing adoption into the two mapped
// namespaces (and, on MinIO, stating the store has one account), every claim becomes
// Ready with the operator running, a claim of the third bucket written by hand is
// refused, and the only writes the store sees are the operator's ownership tags, one
// PutBucketTagging per adopted bucket.
func TestAdoptAStoresUnownedBuckets(t *testing.T) {
	started(t)
	t.Run("SeaweedFS", func(t *testing.T) {
		t.Parallel()
		testAdopt(t, seaweed)
	})
	t.Run("MinIO", func(t *testing.T) {
		t.Parallel()
		minio, err := testenv.StartS3(testenv.MinIO)
		must(t, err)
		t.Cleanup(func() { _ = minio.Close() }) // after the fixture's cleanup
		testAdopt(t, minio)
	})
}

func testAdopt(t *testing.T, srv *testenv.S3Server) {
	minio := srv.Kind == testenv.MinIO
	proxy, err := testenv.StartCountingProxy(srv.Endpoint, srv.AccessKeyID)
	must(t, err)
	t.Cleanup(func() { proxy.Close() })
	label := "test.bucketkeeper.io/adopt"
	f := newFixture(t, srv, func(s *bkv1.ObjectStore) {
		s.Spec.Endpoint = proxy.Endpoint
		s.Spec.AccessProvider = nil
		s.Spec.Guardrails.AdoptionAllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}}
		if minio {
			// MinIO's ACLs name no owner: its buckets are adopted only on the store
			// admin's word that it has one account.
			s.Spec.Guardrails.AdoptionSingleAccount = true
			return
		}
		s.Spec.Guardrails.AdoptionBucketOwner = srv.BucketOwnerID
		s.Spec.Guardrails.AllowPublicBuckets = true
		s.Spec.AdminAPI = &bkv1.AdminAPI{Type: bkv1.AdminAPISeaweedFS,
			CredentialsSecretRef: bkv1.SecretReference{Namespace: s.Spec.CredentialsSecretRef.Namespace, Name: "store-credentials"}}
	})
	f.waitConditions(&bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}}, "Ready=True")
	nsA, nsB := f.ns, f.otherNamespace()
	for _, ns := range []string{nsA, nsB} {
		obj := &corev1.Namespace{}
		must(t, k8s.Get(f.ctx, client.ObjectKey{Name: ns}, obj))
		patch := client.MergeFrom(obj.DeepCopy())
		if obj.Labels == nil {
			obj.Labels = map[string]string{}
		}
		obj.Labels[label] = "yes"
		must(t, k8s.Patch(f.ctx, obj, patch))
	}

	owned := f.claim("owned")
	f.waitConditions(owned, "Ready=True")
	admin := adminOf(t, srv)
	prefix := "adopt-" + f.ns[len("plugin-"):] + "-"
	cases := makeAdoptBuckets(t, f, srv, admin, prefix, f.store)
	stray := prefix + "z-stray"
	must(t, admin.CreateBucket(f.ctx, stray, ""))
	// foreign is a bucket in a mapped namespace's name that no claim of this cluster
	// may take, and why adopt skips it and the operator refuses a claim of it.
	foreign := prefix + "a-foreign"
	var foreignSkip, foreignRefused string
	if minio {
		// MinIO has no other account: every user of a deployment acts on its one set
		// of buckets, and its ACLs name no owner, so "another account's bucket" does
		// not exist there (the harness's second identity is a session of the same
		// deployment). Its counterpart is a bucket another cluster's operator tagged
		// as one of its claims'.
		must(t, admin.CreateBucket(f.ctx, foreign, ""))
		must(t, admin.PutBucketTagging(f.ctx, foreign, map[string]string{bkv1.TagClaim: "apps/state",
			bkv1.TagUID: "0b9f6a52-3c1e-4a8e-9d1f-6e2b7c4d5a10/5d2c8e7f-1a3b-4c6d-8e9f-0a1b2c3d4e5f", bkv1.TagCluster: "another-cluster"}))
		foreignSkip, foreignRefused = foreign+": tagged as StorageBucket apps/state's", bkv1.ReasonOwnedByAnotherCluster
	} else {
		other, err := s3.New(f.ctx, s3.Config{Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
			AccessKeyID: srv.OtherAccessKeyID, SecretAccessKey: srv.OtherSecretAccessKey, RequestTimeout: 30 * time.Second})
		must(t, err)
		must(t, other.CreateBucket(f.ctx, foreign, ""))
		foreignSkip, foreignRefused = foreign+": the store names its owner", bkv1.ReasonBucketNameTaken
	}

	before := proxy.Writes()
	mapping := fmt.Sprintf("%sa-=%s,%sb-*=%s", prefix, nsA, prefix, nsB)
	dir := t.TempDir()
	r := plugin(t, "", "adopt", "objectstore/"+f.store, "--namespace-map", mapping, "--dir", dir)
	if r.code != 0 {
		t.Fatal(r)
	}
	t.Logf("adopt --dir:\n%s", r)
	r.contains(t, "adopt --dir", fmt.Sprintf("%d StorageBuckets written", len(cases)), stray+": no --namespace-map rule matches it", foreignSkip,
		owned.Status.BucketName+": tagged as StorageBucket "+f.ns+"/owned's")
	stdout := plugin(t, "", "adopt", f.store, "--namespace-map", mapping)
	if stdout.code != 0 {
		t.Fatal(stdout)
	}
	if got := proxy.Writes(); len(got) != len(before) {
		t.Fatalf("adopt wrote to the store: %v", got[len(before):])
	}
	// The manifests: one file per bucket of the prefix, the same objects on stdout.
	files := map[string]*bkv1.StorageBucket{}
	for _, ns := range []string{nsA, nsB} {
		entries, err := os.ReadDir(filepath.Join(dir, ns))
		must(t, err)
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(dir, ns, e.Name()))
			must(t, err)
			objs := decodeClaims(t, string(data))
			if len(objs) != 1 || objs[0].Namespace != ns || e.Name() != objs[0].Name+".yaml" {
				t.Fatalf("%s/%s: %d objects, want one StorageBucket of namespace %s named after the file", ns, e.Name(), len(objs), ns)
			}
			files[objs[0].Name] = objs[0]
		}
	}
	printed := map[string]*bkv1.StorageBucket{}
	for _, sb := range decodeClaims(t, stdout.stdout) {
		printed[sb.Name] = sb
	}
	if len(files) != len(cases) || !reflect.DeepEqual(files, printed) {
		t.Fatalf("%d files and %d manifests on stdout, want %d each and the same:\n%s", len(files), len(printed), len(cases), stdout)
	}
	for _, c := range cases {
		sb := files[c.name]
		switch {
		case sb == nil:
			t.Errorf("%s: no manifest", c.name)
		case !reflect.DeepEqual(normalSpec(sb.Spec), normalSpec(c.want)):
			t.Errorf("%s: spec\n%+v\nwant\n%+v", c.name, normalSpec(sb.Spec), normalSpec(c.want))
		}
	}
	if files[foreign] != nil {
		t.Errorf("the bucket no claim may take, %s, got a manifest", foreign)
	}

	// Applied, every claim adopts its bucket and is Ready; the store sees nothing but
	// the ownership tags.
	for _, c := range cases {
		sb := files[c.name]
		must(t, k8s.Create(f.ctx, sb))
	}
	for _, c := range cases {
		sb := files[c.name]
		f.waitConditions(sb, "Ready=True/Ready", "Provisioned=True/"+bkv1.ReasonBucketAdopted, "Configured=True/"+bkv1.ReasonConfigApplied)
	}
	// The bucket adopt skipped, claimed by hand as adopt would have: refused.
	f.waitConditions(f.claim("foreign", func(sb *bkv1.StorageBucket) {
		sb.Spec.BucketName, sb.Spec.Adoption, sb.Spec.DeletionPolicy = foreign, bkv1.AdoptionIfUnowned, bkv1.DeletionPolicyRetain
	}), "Ready=False/"+foreignRefused, "Stalled=True/"+foreignRefused)
	var want []string
	for _, c := range cases {
		want = append(want, "PUT /"+c.name+"?tagging")
	}
	if got := proxy.Writes()[len(before):]; !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("writes while the claims were adopted: %v\nwant one PutBucketTagging per bucket: %v", got, want)
	}

	// Each claim's settings are the bucket's: its tags are the spec's and the
	// operator's ownership tags, nothing else.
	for _, c := range cases {
		tags, err := admin.GetBucketTagging(f.ctx, c.name)
		must(t, err)
		maps.DeleteFunc(tags, func(k, _ string) bool { return strings.HasPrefix(k, bkv1.ReservedTagPrefix) })
		if !maps.Equal(tags, c.want.Tags) {
			t.Errorf("%s: tags %v, want %v", c.name, tags, c.want.Tags)
		}
	}
}

// makeAdoptBuckets makes the 20 buckets, with settings varied by their index, and
// returns the spec adopt must write for each. Names with "a-" go to the first mapped
// namespace, "b-" to the second.
// On MinIO they have only what it keeps (docs/stores.md, "MinIO"): no CORS, no
// public-access block (the spec leaves publicAccess unset, as adopt reads none) and no
// quota (no adminAPI speaks MinIO's); its lifecycle rules have no
// abortIncompleteMultipartUploadDays, as none of these do.
func makeAdoptBuckets(t *testing.T, f *fixture, srv *testenv.S3Server, c s3.Client, prefix, store string) []adoptCase {
	t.Helper()
	ctx := f.ctx
	minio := srv.Kind == testenv.MinIO
	full := s3.PublicAccessBlock{BlockPublicAcls: true, IgnorePublicAcls: true, BlockPublicPolicy: true, RestrictPublicBuckets: true}
	var cases []adoptCase
	for i := range 20 {
		group := "a"
		if i >= 10 {
			group = "b"
		}
		name := fmt.Sprintf("%s%s-%02d", prefix, group, i)
		want := bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: store}, BucketName: name,
			Adoption: bkv1.AdoptionIfUnowned, DeletionPolicy: bkv1.DeletionPolicyRetain}
		if i == 5 {
			must(t, c.CreateBucketWithObjectLock(ctx, name, ""))
			must(t, c.PutObjectLockConfiguration(ctx, name, s3.ObjectLockConfig{Enabled: true,
				DefaultRetention: &s3.DefaultRetention{Mode: s3.RetentionGovernance, Days: 1}}))
			want.ObjectLock = &bkv1.ObjectLock{DefaultRetention: &bkv1.ObjectLockRetention{Mode: bkv1.ObjectLockGovernance, Days: ptr.To[int32](1)}}
			want.Versioning = bkv1.VersioningEnabled
		} else {
			must(t, c.CreateBucket(ctx, name, ""))
		}
		want.Tags = map[string]string{"team": group, "index": fmt.Sprint(i)}
		must(t, c.PutBucketTagging(ctx, name, want.Tags))
		switch {
		case i == 5:
		case i%5 == 1:
			must(t, c.PutBucketVersioning(ctx, name, s3.VersioningEnabled))
			must(t, c.PutBucketVersioning(ctx, name, s3.VersioningSuspended))
			want.Versioning = bkv1.VersioningSuspended
		case i%2 == 0:
			must(t, c.PutBucketVersioning(ctx, name, s3.VersioningEnabled))
			want.Versioning = bkv1.VersioningEnabled
		}
		if i%3 == 0 {
			rule := s3.LifecycleRule{ID: "expire-tmp", Prefix: "tmp/", ExpirationDays: ptr.To(int32(7 + i))}
			if i%6 == 0 {
				rule.NoncurrentVersionExpirationDays = ptr.To[int32](30)
			}
			must(t, c.PutBucketLifecycle(ctx, name, []s3.LifecycleRule{rule}))
			want.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{{ID: rule.ID, Prefix: rule.Prefix,
				ExpirationDays: rule.ExpirationDays, NoncurrentVersionExpirationDays: rule.NoncurrentVersionExpirationDays}}}
		}
		switch {
		case minio:
		case i%7 == 3:
			want.PublicAccess = bkv1.PublicAccessAllowed // none, on a store that allows public buckets
		default:
			must(t, c.PutPublicAccessBlock(ctx, name, full))
			want.PublicAccess = bkv1.PublicAccessBlocked
		}
		if i%4 == 0 {
			policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Sid":"KeepKept","Effect":"Deny","Principal":"*","Action":["s3:DeleteObject"],"Resource":["arn:aws:s3:::%s/keep/*"]}]}`, name)
			must(t, c.PutBucketPolicy(ctx, name, policy))
			got, err := c.GetBucketPolicy(ctx, name) // the spec holds the policy as the store gives it back
			must(t, err)
			want.Policy = policyJSON(t, got)
		}
		if i%4 == 1 && !minio {
			rule := s3.CORSRule{ID: "web", AllowedOrigins: []string{"https://app.example"}, AllowedMethods: []string{"GET", "PUT"},
				AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: ptr.To[int32](600)}
			must(t, c.PutBucketCors(ctx, name, []s3.CORSRule{rule}))
			want.CORS = []bkv1.CORSRule{{ID: "web", AllowedOrigins: rule.AllowedOrigins, AllowedMethods: []bkv1.CORSMethod{"GET", "PUT"},
				AllowedHeaders: rule.AllowedHeaders, ExposeHeaders: rule.ExposeHeaders, MaxAgeSeconds: rule.MaxAgeSeconds}}
		}
		if i == 7 && !minio {
			admin, err := quota.New(quota.Config{Type: bkv1.AdminAPISeaweedFS, Endpoint: srv.Endpoint, Region: srv.Region,
				AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey})
			must(t, err)
			must(t, admin.SetBucketQuota(ctx, name, quota.Limits{MaxBytes: 64 << 20}))
			want.Quota = &bkv1.BucketQuota{MaxSize: resource.NewQuantity(64<<20, resource.BinarySI)}
		}
		cases = append(cases, adoptCase{name: name, want: want})
	}
	return cases
}

// storeAdmin is an S3 client of the suite's SeaweedFS with its admin's keys, straight
// to the server: what a store's admin made the buckets with.
func storeAdmin(t *testing.T) s3.Client {
	t.Helper()
	c, err := s3.New(context.Background(), s3.Config{Endpoint: seaweed.Endpoint, Region: seaweed.Region, ForcePathStyle: true,
		AccessKeyID: seaweed.AccessKeyID, SecretAccessKey: seaweed.SecretAccessKey, RequestTimeout: 30 * time.Second})
	must(t, err)
	return c
}

// decodeClaims reads the StorageBuckets of a YAML stream.
func decodeClaims(t *testing.T, text string) []*bkv1.StorageBucket {
	t.Helper()
	var out []*bkv1.StorageBucket
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	for {
		sb := &bkv1.StorageBucket{}
		if err := dec.Decode(sb); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding the manifests: %v\n%s", err, text)
		}
		if sb.Kind == "" {
			continue
		}
		if sb.Kind != "StorageBucket" || sb.APIVersion != bkv1.GroupVersion.String() {
			t.Fatalf("a manifest of kind %s %s", sb.APIVersion, sb.Kind)
		}
		out = append(out, sb)
	}
}

// normalSpec makes two specs comparable with DeepEqual: quantities by their value,
// policies by their document.
func normalSpec(s bkv1.StorageBucketSpec) bkv1.StorageBucketSpec {
	s = *s.DeepCopy()
	if s.Quota != nil && s.Quota.MaxSize != nil {
		s.Quota.MaxSize = resource.NewQuantity(s.Quota.MaxSize.Value(), resource.BinarySI)
	}
	if s.Policy != nil {
		s.Policy = policyJSON(nil, string(s.Policy.Raw))
	}
	return s
}

// policyJSON is a policy document with its keys sorted, as a spec read from YAML holds
// it: two are the same document when their policyJSON are equal.
func policyJSON(t *testing.T, doc string) *apiextensionsv1.JSON {
	var v any
	err := json.Unmarshal([]byte(doc), &v)
	if err == nil {
		var out []byte
		if out, err = json.Marshal(v); err == nil {
			return &apiextensionsv1.JSON{Raw: out}
		}
	}
	if t != nil {
		t.Fatalf("policy %s: %v", doc, err)
	}
	return &apiextensionsv1.JSON{Raw: []byte(doc)}
}

// otherNamespace makes a second namespace for the fixture's test, whose claims its
// cleanup abandons (Orphan) and deletes before the fixture's own cleanup runs.
func (f *fixture) otherNamespace() string {
	f.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: f.ns + "-"}}
	must(f.t, k8s.Create(f.ctx, ns))
	f.t.Cleanup(func() {
		other := &fixture{t: f.t, ctx: f.ctx, ns: ns.Name, store: f.store}
		other.cleanupClaims()
	})
	return ns.Name
}
