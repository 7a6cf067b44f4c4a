package docs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Sample is one object of a ```yaml block of a page.
type Sample struct {
	Where string // page:line
	Obj   *unstructured.Unstructured
}

// Samples returns the objects of every ```yaml block of the pages, but those marked
// NotAppliedMarker; skipped counts those.
func Samples(pages []Page) (samples []Sample, skipped int, err error) {
	for _, p := range pages {
		_, blocks := p.Split()
		for _, b := range blocks {
			if b.Info != "yaml" && b.Info != "yml" {
				continue
			}
			where := fmt.Sprintf("%s:%d", p.Path, b.N)
			if strings.HasPrefix(b.Before, NotAppliedMarker) {
				skipped++
				continue
			}
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(b.Body)), 4096)
			for {
				u := &unstructured.Unstructured{}
				if err := dec.Decode(&u.Object); err != nil {
					if errors.Is(err, io.EOF) {
						break
					}
					return nil, 0, fmt.Errorf("%s: %w", where, err)
				}
				if len(u.Object) == 0 {
					continue
				}
				if u.GetAPIVersion() == "" || u.GetKind() == "" {
					return nil, 0, fmt.Errorf("%s: a ```yaml block that is no object (give it apiVersion and kind, or mark it %s why -->)", where, NotAppliedMarker)
				}
				samples = append(samples, Sample{Where: where, Obj: u})
			}
		}
	}
	return samples, skipped, nil
}

// TestSamplesValidate applies every YAML sample of the docs with server-side dry-run
// against a real API server with the CRDs installed: a sample the API no longer takes
// (a renamed field, a value out of its enum, a broken CEL rule) fails here. The
// namespaces the samples name are created first, as a reader's cluster has them.
func TestSamplesValidate(t *testing.T) {
	_, pages := loadPages(t)
	samples, skipped, err := Samples(pages)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) < 8 {
		t.Fatalf("only %d YAML samples found in the docs", len(samples))
	}
	if skipped > 2 {
		t.Errorf("%d YAML blocks are marked not applied; write whole objects instead", skipped)
	}
	c, err := client.New(controlPlane(t).Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, s := range samples {
		if ns := s.Obj.GetNamespace(); ns != "" {
			err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("namespace %s: %v", ns, err)
			}
		}
	}
	for _, s := range samples {
		t.Run(s.Where+"/"+s.Obj.GetKind()+"/"+s.Obj.GetName(), func(t *testing.T) {
			obj := s.Obj.DeepCopy()
			if err := c.Patch(ctx, obj, client.Apply, client.DryRunAll, client.FieldOwner("docs-samples"), client.ForceOwnership); err != nil {
				t.Errorf("%s: the API server refuses the sample %s %s: %v", s.Where, s.Obj.GetKind(), s.Obj.GetName(), err)
			}
		})
	}
}
