package s3

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// A key's delete marker written in the same second as its versions can only be put in
// its place by the order of the answer's XML, which the SDK's two lists lose.
func TestVersionEntriesKeepTheStoresOrder(t *testing.T) {
	same := time.Unix(1700000000, 0)
	out := &awss3.ListObjectVersionsOutput{
		Versions: []types.ObjectVersion{
			{Key: aws.String("a"), VersionId: aws.String("v3"), LastModified: &same, ETag: aws.String(`"e3"`), Size: aws.Int64(3)},
			{Key: aws.String("a"), VersionId: aws.String("v1"), LastModified: &same, ETag: aws.String(`"e1"`), Size: aws.Int64(1)},
			{Key: aws.String("b"), VersionId: aws.String("w1"), LastModified: &same},
		},
		DeleteMarkers: []types.DeleteMarkerEntry{
			{Key: aws.String("a"), VersionId: aws.String("m2"), LastModified: &same},
		},
	}
	raw := []byte(`<?xml version="1.0" encoding="UTF-8"?>
<ListVersionsResult><Name>bk</Name><KeyMarker></KeyMarker>
<Version><Key>a</Key><VersionId>v3</VersionId><IsLatest>true</IsLatest></Version>
<DeleteMarker><Key>a</Key><VersionId>m2</VersionId></DeleteMarker>
<Version><Key>a</Key><VersionId>v1</VersionId></Version>
<Version><Key>b</Key><VersionId>w1</VersionId></Version>
</ListVersionsResult>`)
	got := versionEntries(out, raw)
	want := []string{"a/v3", "a/m2", "a/v1", "b/w1"}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for i, e := range got {
		if e.Key+"/"+e.VersionID != want[i] {
			t.Fatalf("entry %d is %s/%s, want %s (all: %+v)", i, e.Key, e.VersionID, want[i], got)
		}
	}
	if !got[1].IsDeleteMarker || got[0].ETag != "e3" || got[0].Size != 3 {
		t.Errorf("entries lost their fields: %+v", got)
	}
	// Without the XML, a key's entries fall back to newest first by time: still
	// grouped by key.
	if got := versionEntries(out, nil); got[3].Key != "b" {
		t.Errorf("fallback order %+v", got)
	}
}

// Versity lists a page's delete markers before its versions: the entries come back in
// key order, each key's newest first by its version IDs (ULIDs, made in order).
func TestVersionEntriesOfAStoreListingMarkersApart(t *testing.T) {
	same := time.Unix(1700000000, 0)
	out := &awss3.ListObjectVersionsOutput{
		Versions: []types.ObjectVersion{
			{Key: aws.String("a"), VersionId: aws.String("01B"), LastModified: &same},
			{Key: aws.String("k"), VersionId: aws.String("01E"), LastModified: &same},
			{Key: aws.String("k"), VersionId: aws.String("01C"), LastModified: &same},
			{Key: aws.String("z"), VersionId: aws.String("01G"), LastModified: &same, IsLatest: aws.Bool(true)},
		},
		DeleteMarkers: []types.DeleteMarkerEntry{
			{Key: aws.String("k"), VersionId: aws.String("01F"), LastModified: &same, IsLatest: aws.Bool(true)},
			{Key: aws.String("k"), VersionId: aws.String("01D"), LastModified: &same},
			{Key: aws.String("a"), VersionId: aws.String("01H"), LastModified: &same, IsLatest: aws.Bool(true)},
		},
	}
	raw := []byte(`<ListVersionsResult>
<DeleteMarker><Key>a</Key><VersionId>01H</VersionId></DeleteMarker>
<DeleteMarker><Key>k</Key><VersionId>01F</VersionId></DeleteMarker>
<DeleteMarker><Key>k</Key><VersionId>01D</VersionId></DeleteMarker>
<Version><Key>a</Key><VersionId>01B</VersionId></Version>
<Version><Key>k</Key><VersionId>01E</VersionId></Version>
<Version><Key>k</Key><VersionId>01C</VersionId></Version>
<Version><Key>z</Key><VersionId>01G</VersionId></Version>
</ListVersionsResult>`)
	var got []string
	for _, e := range versionEntries(out, raw) {
		got = append(got, e.Key+"/"+e.VersionID)
	}
	want := "a/01H a/01B k/01F k/01E k/01D k/01C z/01G"
	if strings.Join(got, " ") != want {
		t.Errorf("entries %v, want %s", got, want)
	}
}
