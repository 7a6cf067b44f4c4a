package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// What env checks of a Secret before it passes anything on. The Secret is controlled by
// the claim or access, but anyone who may write Secrets in the namespace (its tenant)
// can change it, and a tenant can keep the operator from writing it again (an access
// waiting on a bucket that is not Ready leaves its Secret alone). The person running env
// may be a platform admin with the cluster's credentials in their shell: a variable of
// the tenant's (PROMPT_COMMAND, BASH_ENV, PS4 with SHELLOPTS, LD_PRELOAD, ...) would run
// the tenant's code there, and an endpoint of the tenant's would get the admin's data.

// vet returns the data env passes on from s: the keys the operator writes into a Secret
// of its kind and no other (the others are named on stderr), once every value is text
// a shell and a terminal take as it is and the endpoint and CA bundle are those of the
// ObjectStore the bucket lives on.
func (o *envOptions) vet(ctx context.Context, c client.Client, s *envSecret) (map[string][]byte, error) {
	where := fmt.Sprintf("Secret %s/%s", s.Namespace, s.Name)
	if extra := bkv1.UnlistedSecretKeys(s.Data, s.listed); len(extra) > 0 {
		fmt.Fprintf(o.streams.ErrOut, "warning: %s holds keys bucketkeeper does not write there; they are left out: %s\n", where, strings.Join(extra, ", "))
	}
	data := map[string][]byte{}
	for _, k := range s.listed {
		if v, ok := s.Data[k]; ok {
			data[k] = v
		}
	}
	for _, k := range sortedKeys(data) {
		if err := plainText(data[k]); err != nil {
			return nil, fmt.Errorf("%s: its %s %v, which bucketkeeper never writes; it is not used", where, k, err)
		}
	}
	store, err := readStore(ctx, c, s.store)
	switch {
	case err == nil:
		if err := sameTransport(data, store); err != nil {
			return nil, fmt.Errorf("%s: %v: not what bucketkeeper writes there (someone changed it, or a move has not switched it yet), so it is not used", where, err)
		}
	case !errors.Is(err, errUnchecked):
		return nil, err
	case o.skipEndpointCheck:
		fmt.Fprintf(o.streams.ErrOut, "warning: %s: %v; its %s %q is used as it is, not checked (--skip-endpoint-check)\n",
			where, err, bkv1.SecretKeyAWSEndpointS3, data[bkv1.SecretKeyAWSEndpointS3])
	default:
		return nil, fmt.Errorf("%s: %v, and anyone who may write Secrets in namespace %s can change it, so it is not used. "+
			"Check the endpoint yourself (%s env without a command lists it), then pass --skip-endpoint-check to use it unchecked",
			where, err, s.Namespace, "kubectl bucketkeeper")
	}
	return data, nil
}

// errUnchecked marks a store env cannot read, so whose endpoint it cannot compare.
var errUnchecked = errors.New("the endpoint cannot be checked")

// readStore reads the ObjectStore named name; an error wrapping errUnchecked when
// there is none to read or the caller may not read it (a tenant's Role covers no
// ObjectStores).
func readStore(ctx context.Context, c client.Client, name string) (*bkv1.ObjectStore, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: which ObjectStore the bucket lives on is not known yet", errUnchecked)
	}
	store := &bkv1.ObjectStore{}
	err := c.Get(ctx, types.NamespacedName{Name: name}, store)
	switch {
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("%w: you cannot read ObjectStore %s to compare its endpoint", errUnchecked, name)
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: ObjectStore %s, whose endpoint it must name, does not exist", errUnchecked, name)
	case err != nil:
		return nil, err
	}
	return store, nil
}

// storeOfAccess is the ObjectStore an access's key was issued on: its status says so
// (written by the operator only), else the one store of the buckets it grants; ""
// when that is not known.
func storeOfAccess(ctx context.Context, c client.Client, ba *bkv1.BucketAccess) (string, error) {
	if ba.Status.ObjectStore != "" {
		return ba.Status.ObjectStore, nil
	}
	store := ""
	for _, g := range ba.Spec.Buckets {
		sb := &bkv1.StorageBucket{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ba.Namespace, Name: g.Name}, sb); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return "", err
		}
		switch {
		case store == "":
			store = sb.HomeStore()
		case sb.HomeStore() != store:
			return "", nil
		}
	}
	return store, nil
}

// awsEndpoint is the endpoint the operator writes for a store without spec.endpoint
// (AWS): S3's in the bucket's region.
var awsEndpoint = regexp.MustCompile(`^https://s3\.[a-z0-9]+(-[a-z0-9]+)*\.amazonaws\.com$`)

// sameTransport says where data's endpoint or CA bundle differ from what the operator
// writes for store: the store's spec.endpoint (for AWS, S3's endpoint of a region) in
// every key that holds it or its host and port, and the store's spec.caBundle.
func sameTransport(data map[string][]byte, store *bkv1.ObjectStore) error {
	endpoint := string(data[bkv1.SecretKeyAWSEndpointS3])
	want := store.Spec.Endpoint
	switch {
	case endpoint == "":
		return fmt.Errorf("it holds no %s", bkv1.SecretKeyAWSEndpointS3)
	case want == "" && !awsEndpoint.MatchString(endpoint):
		return fmt.Errorf("its %s %q is not S3's endpoint on AWS (https://s3.REGION.amazonaws.com), where ObjectStore %s is", bkv1.SecretKeyAWSEndpointS3, endpoint, store.Name)
	case want != "" && endpoint != want:
		return fmt.Errorf("its %s %q is not the endpoint of ObjectStore %s, %s", bkv1.SecretKeyAWSEndpointS3, endpoint, store.Name, want)
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return fmt.Errorf("its %s %q is no URL", bkv1.SecretKeyAWSEndpointS3, endpoint)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	for _, kv := range [][2]string{{bkv1.SecretKeyBucketEndpoint, endpoint}, {bkv1.SecretKeyBucketHost, u.Hostname()}, {bkv1.SecretKeyBucketPort, port}} {
		if v, ok := data[kv[0]]; ok && string(v) != kv[1] {
			return fmt.Errorf("its %s %q is not that of ObjectStore %s's endpoint, %s", kv[0], v, store.Name, endpoint)
		}
	}
	if string(data[bkv1.SecretKeyCABundle]) != store.Spec.CABundle {
		return fmt.Errorf("its %s is not ObjectStore %s's spec.caBundle", bkv1.SecretKeyCABundle, store.Name)
	}
	return nil
}

// plainText says what in v a terminal or a shell would not take as it is: bytes that
// are not UTF-8, or a control character but tab, newline and carriage return (a PEM
// bundle's). Nothing the operator writes holds one; a NUL cannot be in a variable and
// an escape sequence would drive the terminal that env's listing or --export is printed
// on.
func plainText(v []byte) error {
	if !utf8.Valid(v) {
		return errors.New("is not UTF-8 text")
	}
	for _, r := range string(v) {
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return fmt.Errorf("holds the control character %U", r)
		}
	}
	return nil
}
