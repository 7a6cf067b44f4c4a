package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/guardrail"
	"github.com/bucketkeeper/bucketkeeper/internal/quota"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// What adopt reads of one bucket, and how each setting becomes the spec's. The rule the
// operator follows on an adopted bucket (config.go) is that what the spec does not name
// stays as it is, unmanaged; so everything the bucket has that the spec can say is
// written into it, and what it cannot say (a lifecycle rule with transitions, a policy
// the guardrails refuse) is named in a note, in the manifest and on stderr, never
// silently dropped. Each setting is read once; nothing is written.

// bucketRead is one bucket as adopt found it.
type bucketRead struct {
	name string
	// skip says why no manifest is written for it; empty when one is.
	skip string
	// failed: the skip is an error reading the bucket, not a verdict on it.
	failed bool

	namespace, rule string
	spec            bkv1.StorageBucketSpec
	// notes are what the manifest cannot declare, or what the operator will change on
	// the bucket once it adopts it.
	notes []string
}

func (b *bucketRead) note(format string, args ...any) {
	b.notes = append(b.notes, fmt.Sprintf(format, args...))
}

// storeView is what reading a bucket needs of its store.
type storeView struct {
	store  *bkv1.ObjectStore
	s3     s3.Client
	quotas quota.Client // nil: the store has no admin API
	// ownerOnce is the owner a bucket that names one must have to be adopted:
	// guardrails.adoptionBucketOwner, else the owner ListBuckets names for the store's
	// credentials, read once and only when a bucket names an owner.
	ownerOnce func() (string, error)
	// claimed maps bucket names to the StorageBucket (namespace/name) naming them.
	claimed map[string]string
	nsMap   *namespaceMap
}

// bucketNameRE and the checks of validBucketName are spec.bucketName's admission rules.
var bucketNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`)
var ipv4RE = regexp.MustCompile(`^[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+$`)

// validBucketName says why a bucket's name cannot be a StorageBucket's spec.bucketName
// and metadata.name, "" when it can.
func validBucketName(name string) string {
	switch {
	case len(name) < 3 || len(name) > 63 || !bucketNameRE.MatchString(name) || strings.Contains(name, "..") || ipv4RE.MatchString(name):
		return "its name is not one spec.bucketName accepts (3 to 63 lowercase letters, digits, '.' and '-')"
	case strings.HasPrefix(name, "xn--") || strings.HasPrefix(name, "sthree-") || strings.HasSuffix(name, "-s3alias") || strings.HasSuffix(name, "--ol-s3"):
		return "its name uses a prefix or suffix S3 reserves, which spec.bucketName refuses"
	case len(validation.IsDNS1123Subdomain(name)) > 0:
		return "its name is not a valid Kubernetes object name"
	}
	return ""
}

// readBucket reads everything of name that a StorageBucket's spec can say.
func (v *storeView) readBucket(ctx context.Context, name string) *bucketRead {
	b := &bucketRead{name: name}
	fail := func(what string, err error) *bucketRead {
		b.skip, b.failed = fmt.Sprintf("reading its %s: %v", what, err), true
		return b
	}
	tags, err := v.s3.GetBucketTagging(ctx, name)
	if s3.KindOf(err) == s3.KindAccessDenied {
		// As the operator reads it (bucket.go's headBucket): another account's bucket.
		b.skip = "the store's credentials may not read its tags: it belongs to another account"
		return b
	}
	if err != nil {
		return fail("tags", err)
	}
	if why := ownedBy(tags); why != "" {
		b.skip = why
		return b
	}
	if claim, ok := v.claimed[name]; ok {
		b.skip = "StorageBucket " + claim + " already names it"
		return b
	}
	if why := validBucketName(name); why != "" {
		b.skip = why
		return b
	}
	if b.namespace, b.rule = v.nsMap.namespaceFor(name); b.namespace == "" {
		b.skip = "no --namespace-map rule matches it, and no --default-namespace is given"
		return b
	}
	got, err := v.s3.BucketOwner(ctx, name)
	if err != nil && s3.KindOf(err) != s3.KindAccessDenied && s3.KindOf(err) != s3.KindNotImplemented {
		return fail("owner", err)
	}
	ok := false
	if err == nil {
		if ok, err = guardrail.BucketOwnerAdoptable(got, v.store.Spec.Guardrails.AdoptionSingleAccount, v.ownerOnce); err != nil {
			return fail("owner", err)
		}
	}
	switch {
	case !ok && err == nil && got == "":
		b.skip = fmt.Sprintf("the store names no owner for it, and ObjectStore %s does not state that every bucket on it is the account's it acts for (guardrails.adoptionSingleAccount, as on MinIO)", v.store.Name)
		return b
	case !ok:
		want, _ := v.ownerOnce()
		b.skip = fmt.Sprintf("the store names its owner %q, not %q, the account ObjectStore %s acts for: the operator adopts only that account's buckets (guardrails.adoptionBucketOwner says how the store names it)",
			got, want, v.store.Name)
		return b
	}

	spec := &b.spec
	spec.ObjectStoreRef.Name = v.store.Name
	spec.BucketName = name
	spec.Adoption = bkv1.AdoptionIfUnowned
	spec.DeletionPolicy = bkv1.DeletionPolicyRetain

	region, err := v.s3.HeadBucket(ctx, name)
	if err != nil {
		return fail("region", err)
	}
	if region != "" && region != storeRegion(v.store) {
		spec.Region = region
	}
	spec.Tags = specTags(tags)
	if len(spec.Tags) > bkv1.MaxBucketTags-3 {
		b.note("it has %d tags; with the operator's 3 ownership tags that passes S3's %d, and the operator will refuse it (InvalidTags) until some go", len(spec.Tags), bkv1.MaxBucketTags)
	}
	for _, step := range []struct {
		what string
		read func(context.Context, *bucketRead) error
	}{
		{"versioning", v.readVersioning},
		{"object lock", v.readObjectLock},
		{"lifecycle", v.readLifecycle},
		{"public access block", v.readPublicAccess},
		{"policy", v.readPolicy},
		{"CORS", v.readCORS},
		{"quota", v.readQuota},
	} {
		if err := step.read(ctx, b); err != nil {
			return fail(step.what, err)
		}
	}
	return b
}

// ownedBy says why a bucket's tags make it no adoption's: a claim's, a released
// claim's, another cluster's. "" when it carries none of the ownership tags.
func ownedBy(tags map[string]string) string {
	claim, uid, cluster := tags[bkv1.TagClaim], tags[bkv1.TagUID], tags[bkv1.TagCluster]
	switch {
	case claim != "":
		return "tagged as StorageBucket " + claim + "'s (" + bkv1.TagClaim + ")"
	case uid != "" || cluster != "":
		return "it carries bucketkeeper's ownership tags (" + bkv1.TagUID + ", " + bkv1.TagCluster + ")"
	}
	return ""
}

// specTags are the bucket's tags a spec may name: not the store's own (aws:) nor the
// operator's (bucketkeeper.io/).
func specTags(tags map[string]string) map[string]string {
	out := maps.Clone(tags)
	maps.DeleteFunc(out, func(k, _ string) bool {
		return strings.HasPrefix(k, bkv1.SystemTagPrefix) || strings.HasPrefix(k, bkv1.ReservedTagPrefix)
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

func (v *storeView) readVersioning(ctx context.Context, b *bucketRead) error {
	status, err := v.s3.GetBucketVersioning(ctx, b.name)
	if err == nil {
		b.spec.Versioning = bkv1.VersioningState(status) // "" for never versioned: left unset
	}
	return err
}

func (v *storeView) readObjectLock(ctx context.Context, b *bucketRead) error {
	cfg, err := v.s3.GetObjectLockConfiguration(ctx, b.name)
	if s3.KindOf(err) == s3.KindNotImplemented {
		return nil
	}
	if err != nil || !cfg.Enabled {
		return err
	}
	lock := &bkv1.ObjectLock{}
	if r := cfg.DefaultRetention; r != nil {
		lock.DefaultRetention = &bkv1.ObjectLockRetention{Mode: bkv1.ObjectLockGovernance}
		if r.Mode == s3.RetentionCompliance {
			lock.DefaultRetention.Mode = bkv1.ObjectLockCompliance
		}
		if r.Years > 0 {
			lock.DefaultRetention.Years = ptr.To(r.Years)
		} else {
			lock.DefaultRetention.Days = ptr.To(r.Days)
		}
		rails := &v.store.Spec.Guardrails.ObjectLock
		if !rails.ModeAllowed(lock.DefaultRetention.Mode) {
			b.note("its default retention (%s) is of a mode guardrails.objectLock.allowedModes does not allow: the operator will refuse the claim (ObjectLockNotAllowed) until the store allows it", lock.DefaultRetention)
		} else if limit := rails.MaxRetentionDays; limit != nil && lock.DefaultRetention.RetentionDays() > int64(*limit) {
			b.note("its default retention (%s) is longer than guardrails.objectLock.maxRetentionDays (%d): the operator will refuse the claim (ObjectLockNotAllowed) until the store allows it", lock.DefaultRetention, *limit)
		}
	}
	b.spec.ObjectLock = lock
	b.spec.Versioning = bkv1.VersioningEnabled // a locked bucket is versioned, and admission wants it said
	return nil
}

func (v *storeView) readLifecycle(ctx context.Context, b *bucketRead) error {
	rules, err := v.s3.GetBucketLifecycle(ctx, b.name)
	if s3.KindOf(err) == s3.KindNotImplemented {
		return nil
	}
	if err != nil {
		return err
	}
	var out []bkv1.LifecycleRule
	for _, r := range rules {
		noAction := r.ExpirationDays == nil && r.NoncurrentVersionExpirationDays == nil && r.AbortIncompleteMultipartUploadDays == nil
		if r.Verbatim() || r.Disabled || r.ID == "" || noAction {
			b.note("lifecycle rule %q uses what spec.lifecycle cannot say (an ID the store made up, a disabled rule, transitions, filters by tag or size, dates): it stays on the bucket as it is, outside the spec", r.ID)
			continue
		}
		out = append(out, bkv1.LifecycleRule{ID: r.ID, Prefix: r.Prefix, ExpirationDays: r.ExpirationDays,
			NoncurrentVersionExpirationDays: r.NoncurrentVersionExpirationDays, AbortIncompleteMultipartUploadDays: r.AbortIncompleteMultipartUploadDays})
	}
	if len(out) > 0 {
		b.spec.Lifecycle = &bkv1.Lifecycle{Rules: out}
	}
	return nil
}

// readPublicAccess declares the bucket's public-access block: Blocked when every one of
// its four settings is on, Allowed when none is (where the store's guardrails allow
// public buckets). A store without the block (NotImplemented) leaves the field unset,
// as the operator then writes none.
func (v *storeView) readPublicAccess(ctx context.Context, b *bucketRead) error {
	pab, err := v.s3.GetPublicAccessBlock(ctx, b.name)
	if s3.KindOf(err) == s3.KindNotImplemented {
		return nil
	}
	if err != nil {
		return err
	}
	full := s3.PublicAccessBlock{BlockPublicAcls: true, IgnorePublicAcls: true, BlockPublicPolicy: true, RestrictPublicBuckets: true}
	switch {
	case pab != nil && *pab == full:
		b.spec.PublicAccess = bkv1.PublicAccessBlocked
	case (pab == nil || *pab == s3.PublicAccessBlock{}) && v.store.Spec.Guardrails.AllowPublicBuckets:
		b.spec.PublicAccess = bkv1.PublicAccessAllowed
	case pab == nil || *pab == s3.PublicAccessBlock{}:
		b.spec.PublicAccess = bkv1.PublicAccessBlocked
		b.note("it has no public-access block and the store's guardrails do not allow public buckets: the manifest says publicAccess: Blocked, and the operator will block public access on it")
	default:
		b.spec.PublicAccess = bkv1.PublicAccessBlocked
		b.note("its public-access block is partial (%+v), which publicAccess cannot say: the manifest says Blocked, and the operator will turn every setting of it on", *pab)
	}
	return nil
}

func (v *storeView) readPolicy(ctx context.Context, b *bucketRead) error {
	doc, err := v.s3.GetBucketPolicy(ctx, b.name)
	if s3.KindOf(err) == s3.KindNotImplemented || (err == nil && doc == "") {
		return nil
	}
	if err != nil {
		return err
	}
	rails := &v.store.Spec.Guardrails
	report, err := guardrail.InspectPolicy([]byte(doc), b.name, rails.PolicyPrincipalAccounts)
	switch {
	case err != nil:
		b.note("its policy is one the store's guardrails refuse (%v): it stays on the bucket as it is, outside the spec", err)
		return nil
	case report.Public != "" && !rails.AllowPublicBuckets:
		b.note("its policy makes it public (%s) and the store's guardrails do not allow public buckets: it stays on the bucket as it is, outside the spec", report.PublicPrincipal)
		return nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(doc)); err != nil {
		return err
	}
	b.spec.Policy = &apiextensionsv1.JSON{Raw: compact.Bytes()}
	return nil
}

func (v *storeView) readCORS(ctx context.Context, b *bucketRead) error {
	rules, err := v.s3.GetBucketCors(ctx, b.name)
	if k := s3.KindOf(err); k == s3.KindNotImplemented || k == s3.KindAccessDenied {
		if k == s3.KindAccessDenied {
			b.note("its CORS configuration could not be read (AccessDenied): whatever it is stays on the bucket, outside the spec")
		}
		return nil
	}
	if err != nil {
		return err
	}
	for _, r := range rules {
		methods := make([]bkv1.CORSMethod, 0, len(r.AllowedMethods))
		for _, m := range r.AllowedMethods {
			methods = append(methods, bkv1.CORSMethod(m))
		}
		b.spec.CORS = append(b.spec.CORS, bkv1.CORSRule{ID: r.ID, AllowedOrigins: r.AllowedOrigins, AllowedMethods: methods,
			AllowedHeaders: r.AllowedHeaders, ExposeHeaders: r.ExposeHeaders, MaxAgeSeconds: r.MaxAgeSeconds})
	}
	return nil
}

// readQuota reads the bucket's quota through the store's admin API, where it has one.
func (v *storeView) readQuota(ctx context.Context, b *bucketRead) error {
	if v.quotas == nil {
		return nil
	}
	l, err := v.quotas.BucketQuota(ctx, b.name)
	if s3.KindOf(err) == s3.KindNotImplemented {
		return nil
	}
	if err != nil {
		return err
	}
	rails := v.store.Spec.Guardrails.Quota
	if l.IsZero() {
		if rails != nil && rails.Default != nil {
			b.note("it has no quota, and the store's guardrails.quota.default (%s) will give it one once adopted", quotaString(rails.Default))
		}
		return nil
	}
	q := &bkv1.BucketQuota{}
	if l.MaxBytes > 0 {
		q.MaxSize = resource.NewQuantity(l.MaxBytes, resource.BinarySI)
	}
	if l.MaxObjects > 0 {
		q.MaxObjects = ptr.To(l.MaxObjects)
	}
	b.spec.Quota = q
	if rails != nil && rails.Max != nil && exceeds(q, rails.Max) {
		b.note("its quota (%s) exceeds the store's guardrails.quota.max (%s): the operator will refuse the claim until the store allows it", quotaString(q), quotaString(rails.Max))
	}
	return nil
}

// exceeds says whether q asks for more than limit allows.
func exceeds(q, limit *bkv1.BucketQuota) bool {
	if limit.MaxSize != nil && (q.MaxSize == nil || q.MaxSize.Cmp(*limit.MaxSize) > 0) {
		return true
	}
	return limit.MaxObjects != nil && (q.MaxObjects == nil || *q.MaxObjects > *limit.MaxObjects)
}
