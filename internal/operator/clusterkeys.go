package operator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/bucketkeeper/bucketkeeper/internal/iam"
)

// clusterJWKSPath is where the API server publishes the keys its ServiceAccount tokens
// are signed with (service account issuer discovery).
const clusterJWKSPath = "/openid/v1/jwks"

// maxClusterKeySet bounds what is read of it: a few kilobytes per key.
const maxClusterKeySet = 256 << 10

// clusterKeySet reads the ServiceAccount token keys the API server at cfg publishes:
// what a store's issuer must publish alone for keyless trust to be bound to this
// cluster (objectstore.Reconciler.ClusterKeys).
func clusterKeySet(cfg *rest.Config) (func(ctx context.Context) (iam.KeySet, error), error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	u := strings.TrimSuffix(cfg.Host, "/") + clusterJWKSPath
	return func(ctx context.Context) (iam.KeySet, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxClusterKeySet+1))
		switch {
		case err != nil:
			return nil, err
		case len(body) > maxClusterKeySet:
			return nil, fmt.Errorf("%s is larger than %d bytes", clusterJWKSPath, maxClusterKeySet)
		case resp.StatusCode != http.StatusOK:
			return nil, fmt.Errorf("%s answered %s", clusterJWKSPath, resp.Status)
		}
		return iam.ParseKeySet(body)
	}, nil
}
