package main

import "testing"

func TestParseTarget(t *testing.T) {
	all := []kind{kindStorageBucket, kindBucketAccess, kindObjectStore}
	for _, c := range []struct {
		arg  string
		want string // target, or "error"
	}{
		{"photos", "StorageBucket ns/photos"},
		{"sb/photos", "StorageBucket ns/photos"},
		{"storagebuckets.bucketkeeper.io/photos", "StorageBucket ns/photos"},
		{"BA/w", "BucketAccess ns/w"},
		{"bucketaccess/w", "BucketAccess ns/w"},
		{"objectstore/shared", "ObjectStore shared"},
		{"ostore/shared", "ObjectStore shared"},
		{"pod/x", "error"},
		{"sb/", "error"},
		{"sb/a/b", "error"},
	} {
		got, err := parseTarget(c.arg, "ns", kindStorageBucket, all...)
		if (err != nil) != (c.want == "error") || (err == nil && got.String() != c.want) {
			t.Errorf("parseTarget(%q) = %v, %v; want %s", c.arg, got, err, c.want)
		}
	}
	if _, err := parseTarget("objectstore/shared", "ns", kindStorageBucket, kindStorageBucket, kindBucketAccess); err == nil {
		t.Error("parseTarget accepted a kind the verb does not take")
	}
}
