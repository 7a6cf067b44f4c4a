package defaults

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestCRDDefaultsAgree reads the generated CRDs and checks that each field the API
// server defaults gets the value the code falls back to.
func TestCRDDefaultsAgree(t *testing.T) {
	tests := []struct {
		crd  string
		path []string // under spec.versions[0].schema.openAPIV3Schema.properties.spec
		want any
	}{
		{"bucketkeeper.io_storagebuckets.yaml", []string{"probe", "timeout"}, ProbeTimeout},
		{"bucketkeeper.io_objectstores.yaml", []string{"healthCheck", "interval"}, StoreHealthCheckInterval},
		{"bucketkeeper.io_objectstores.yaml", []string{"region"}, StoreRegion},
		{"bucketkeeper.io_objectstores.yaml", []string{"accessProvider", "webIdentity", "maxSessionDuration"}, WebIdentityMaxSessionDuration},
		{"bucketkeeper.io_objectstores.yaml", []string{"guardrails", "objectLock", "releaseBlockedDeletionAfter"}, ReleaseBlockedDeletionAfter},
	}
	for _, tc := range tests {
		t.Run(tc.crd+"/"+filepath.Join(tc.path...), func(t *testing.T) {
			got := crdDefault(t, tc.crd, tc.path)
			switch want := tc.want.(type) {
			case time.Duration:
				s, ok := got.(string)
				d, err := time.ParseDuration(s)
				if !ok || err != nil || d != want {
					t.Errorf("the CRD defaults to %v, the code to %v", got, want)
				}
			default:
				if got != want {
					t.Errorf("the CRD defaults to %v, the code to %v", got, want)
				}
			}
		})
	}
}

// crdDefault returns the default of a field of the CRD's spec in config/crd/bases.
func crdDefault(t *testing.T, file string, path []string) any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", file))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema schema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%s has %d versions, want 1", file, len(crd.Spec.Versions))
	}
	s, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	for _, p := range path {
		if !ok {
			break
		}
		s, ok = s.Properties[p]
	}
	if !ok || s.Default == nil {
		t.Fatalf("%s: spec.%v has no default", file, path)
	}
	return s.Default
}

type schema struct {
	Properties map[string]schema `json:"properties"`
	Default    any               `json:"default"`
}
