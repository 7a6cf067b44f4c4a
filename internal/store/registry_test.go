package store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// scopeRegion is the region of a SigV4 credential scope:
// Credential=<key>/<date>/<region>/s3/aws4_request.
var scopeRegion = regexp.MustCompile(`Credential=[^/]+/\d{8}/([^/]+)/s3/aws4_request`)

// signedRegions is a loopback S3 endpoint that answers every request with 200 and
// records, per bucket (path-style), the regions the requests were signed for.
type signedRegions struct {
	mu      sync.Mutex
	regions map[string][]string
}

func (s *signedRegions) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	region := "unsigned"
	if m := scopeRegion.FindStringSubmatch(req.Header.Get("Authorization")); m != nil {
		region = m[1]
	}
	s.mu.Lock()
	s.regions[req.URL.Path] = append(s.regions[req.URL.Path], region)
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *signedRegions) of(bucket string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.regions["/"+bucket]...)
}

// TestClientPerRegionSignsForTheBucketsRegion: a bucket in another region than its
// store's is addressed with a client that signs for that region; the store's own
// region keeps its client; both draw on one request budget.
func TestClientPerRegionSignsForTheBucketsRegion(t *testing.T) {
	rec := &signedRegions{regions: map[string][]string{}}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "creds", Labels: map[string]string{bkv1.LabelSecretRole: bkv1.SecretRoleCredentials}},
		Data:       map[string][]byte{bkv1.CredentialsKeyAccessKeyID: []byte("AKIDEXAMPLE"), bkv1.CredentialsKeySecretAccessKey: []byte("secret")},
	}
	k8s := fake.NewClientBuilder().WithScheme(scheme).WithObjects(creds).Build()
	var limiters []*rate.Limiter
	reg := &Registry{Client: k8s, APIReader: k8s, Factory: func(ctx context.Context, cfg s3.Config) (s3.Client, error) {
		limiters = append(limiters, cfg.Limiter)
		return s3.New(ctx, cfg)
	}}
	store := &bkv1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: "aws", UID: "store-uid", Generation: 1},
		Spec: bkv1.ObjectStoreSpec{Endpoint: srv.URL, Region: "us-east-1", ForcePathStyle: true,
			CredentialsSecretRef: &bkv1.SecretReference{Namespace: "ops", Name: "creds"},
			RequestsPerSecond:    1, Burst: 1},
	}
	ctx := context.Background()

	home, err := reg.ClientFor(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	eu, err := reg.ClientForRegion(ctx, store, "eu-west-1", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := reg.ClientForRegion(ctx, store, "eu-west-1", "team-a"); again != eu {
		t.Error("a second bucket in eu-west-1 got a new client; clients are per (store, region)")
	}
	if same, _ := reg.ClientForRegion(ctx, store, "", "team-a"); same != home {
		t.Error("an empty region is not the store's region")
	}
	if len(limiters) != 2 || limiters[0] == nil || limiters[0] != limiters[1] {
		t.Fatalf("clients built with limiters %v, want one shared by both regions", limiters)
	}

	// One token, refilled after an hour: whatever client takes it, the next request
	// of any region must wait.
	limiters[0].SetLimit(rate.Every(time.Hour))

	if _, err := eu.HeadBucket(ctx, "in-ireland"); err != nil {
		t.Fatal(err)
	}
	if got := rec.of("in-ireland"); len(got) != 1 || got[0] != "eu-west-1" {
		t.Errorf("requests for the eu-west-1 bucket were signed for %v", got)
	}

	// The budget is the store's: the us-east-1 client finds the token taken by the
	// eu-west-1 request and cannot get another within its deadline.
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := home.HeadBucket(short, "in-virginia"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a request beyond the store's budget from another region's client: %v, want it held back", err)
	}
	if got := rec.of("in-virginia"); len(got) != 0 {
		t.Errorf("the store received %d requests beyond its budget", len(got))
	}

	// Without a budget every request goes through, each signed for its client's region.
	store.Spec.RequestsPerSecond, store.Generation = 0, 2
	home, err = reg.ClientFor(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := home.HeadBucket(ctx, "in-virginia"); err != nil {
		t.Fatal(err)
	}
	if got := rec.of("in-virginia"); len(got) != 1 || got[0] != "us-east-1" {
		t.Errorf("requests for the us-east-1 bucket were signed for %v", got)
	}
	eu, err = reg.ClientForRegion(ctx, store, "eu-west-1", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eu.HeadBucket(ctx, "in-ireland"); err != nil {
		t.Fatal(err)
	}
	if got := rec.of("in-ireland"); len(got) != 2 || got[1] != "eu-west-1" {
		t.Errorf("requests for the eu-west-1 bucket after the store changed were signed for %v", got)
	}
}

// TestRegionsPerStoreAreBounded: tenants choose spec.region, so the clients a store may
// have are bounded, per namespace and in all; the regions it already serves keep
// working for everyone, and its own region is never crowded out.
func TestRegionsPerStoreAreBounded(t *testing.T) {
	built := 0
	r := &Registry{Factory: func(context.Context, s3.Config) (s3.Client, error) { built++; return nil, nil }}
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "shared", UID: "u"}, Spec: bkv1.ObjectStoreSpec{Region: "home"}}
	ctx := context.Background()
	refused := func(err error) bool {
		var se *Error
		return errors.As(err, &se) && se.Reason == bkv1.ReasonConfigFailed
	}

	// One namespace brings at most maxRegionsPerNamespace regions of its own.
	for i := range maxRegionsPerNamespace {
		if _, err := r.ClientForRegion(ctx, store, fmt.Sprintf("junk-%d", i), "hostile"); err != nil {
			t.Fatalf("region %d: %v", i, err)
		}
	}
	if _, err := r.ClientForRegion(ctx, store, "junk-more", "hostile"); !refused(err) {
		t.Fatalf("a namespace's region past its bound: err = %v, want a ConfigFailed Error", err)
	}
	// Other namespaces fill the store up to its bound, the store's own region aside.
	for i := maxRegionsPerNamespace; i < maxRegionsPerStore-1; i++ {
		if _, err := r.ClientForRegion(ctx, store, fmt.Sprintf("region-%d", i), fmt.Sprintf("ns-%d", i)); err != nil {
			t.Fatalf("region %d: %v", i, err)
		}
	}
	if _, err := r.ClientForRegion(ctx, store, "one-too-many", "late"); !refused(err) {
		t.Fatalf("region past the store's bound: err = %v, want a ConfigFailed Error", err)
	}
	if _, err := r.ClientForRegion(ctx, store, "home", "late"); err != nil {
		t.Errorf("the store's own region was crowded out: %v", err)
	}
	if _, err := r.ClientForRegion(ctx, store, "junk-0", "late"); err != nil {
		t.Errorf("a region already served is refused to another namespace: %v", err)
	}
	if built != maxRegionsPerStore {
		t.Errorf("%d clients built, want %d", built, maxRegionsPerStore)
	}
}

// TestMovesTakeTheirShareFromTheOperator: while moves run on a store, the operator's
// own token bucket gives up the share they take, so that both together stay within
// the store's budget; a client rebuilt after a store edit gives it up too, the share
// never exceeds what moves may take, and it is given back once they end.
func TestMovesTakeTheirShareFromTheOperator(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	k8s := fake.NewClientBuilder().WithScheme(scheme).Build()
	var limiters []*rate.Limiter
	reg := &Registry{Client: k8s, APIReader: k8s, Shards: 2, Factory: func(ctx context.Context, cfg s3.Config) (s3.Client, error) {
		limiters = append(limiters, cfg.Limiter)
		return s3.New(ctx, cfg)
	}}
	store := &bkv1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "store-uid", Generation: 1},
		Spec:       bkv1.ObjectStoreSpec{Endpoint: "http://127.0.0.1:1", RequestsPerSecond: 40, Burst: 20},
	}
	ctx := context.Background()
	budget := func() (float64, int) {
		t.Helper()
		if _, err := reg.ClientFor(ctx, store); err != nil {
			t.Fatal(err)
		}
		l := limiters[len(limiters)-1]
		return float64(l.Limit()), l.Burst()
	}
	// This shard's half of the store: 20/s, burst 10.
	if rps, burst := budget(); rps != 20 || burst != 10 {
		t.Fatalf("without moves: %v/s burst %d, want 20/s burst 10", rps, burst)
	}
	reg.SetMoveShare("s", 0.25)
	if rps, burst := budget(); rps != 15 || burst != 7 {
		t.Errorf("with moves taking a quarter: %v/s burst %d, want 15/s burst 7", rps, burst)
	}
	store.Generation = 2 // a store edit builds its clients again
	if rps, burst := budget(); len(limiters) != 2 || rps != 15 || burst != 7 {
		t.Errorf("rebuilt (%d clients): %v/s burst %d, want the moves' quarter given up still: 15/s burst 7", len(limiters), rps, burst)
	}
	reg.SetMoveShare("s", 3)
	if rps, _ := budget(); rps != 20*(1-defaults.MoveShareOfBudget) {
		t.Errorf("moves asking for more than their share: %v/s, want %v/s", rps, 20*(1-defaults.MoveShareOfBudget))
	}
	reg.SetMoveShare("s", 0)
	if rps, burst := budget(); rps != 20 || burst != 10 || reg.MoveShare("s") != 0 {
		t.Errorf("once the moves ended: %v/s burst %d, want 20/s burst 10", rps, burst)
	}
	// A store without a budget has nothing to give up.
	other := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "free", UID: "u2", Generation: 1}, Spec: bkv1.ObjectStoreSpec{Endpoint: "http://127.0.0.1:1"}}
	reg.SetMoveShare("free", 0.5)
	if _, err := reg.ClientFor(ctx, other); err != nil || limiters[len(limiters)-1] != nil {
		t.Errorf("a store without a budget: limiter %v (%v), want none", limiters[len(limiters)-1], err)
	}
}
