package receiver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
)

// MaxBucketsPerRequest caps the distinct bucket names one event may name, and the
// StorageBuckets one request may reach. Stores send one record per event; a document
// naming more is not a notification, and each bucket costs an index lookup and an
// API-server write, so one signed request must not fan out into many.
const MaxBucketsPerRequest = 10

// target is what a verified body asks for: exactly one of a StorageBucket key (direct
// request) or a list of distinct S3 bucket names (event notification).
type target struct {
	key     *types.NamespacedName
	buckets []string
	// canaryOnly: an event whose every record is about a probe's canary object. A
	// ReadWrite probe of a bucket whose notifications point at the receiver would
	// otherwise trigger its next probe, and so on forever.
	canaryOnly bool
}

// s3Record is the part of an S3 event-notification record the receiver needs. AWS,
// Ceph RGW, SeaweedFS and MinIO all put the bucket at Records[].s3.bucket.name and add
// many other fields, which are ignored.
type s3Record struct {
	S3 *struct {
		Bucket *struct {
			Name string `json:"name"`
		} `json:"bucket"`
		Object *struct {
			Key string `json:"key"`
		} `json:"object"`
	} `json:"s3"`
}

// isCanaryKey reports whether an event's object key is under the probe's canary prefix.
// Stores URL-encode the key in events (AWS keeps "/", MinIO writes "%2F", both write
// "+" for a space), so the key is compared both decoded and as sent.
func isCanaryKey(key string) bool {
	if strings.HasPrefix(key, bkv1.CanaryPrefix) {
		return true
	}
	decoded, err := url.QueryUnescape(key)
	return err == nil && strings.HasPrefix(decoded, bkv1.CanaryPrefix)
}

// parse decides which of the two shapes body has and validates it. Its errors are
// fixed texts safe to return to the client: the JSON decoder's own messages quote the
// input, so they are never passed on.
//
// The shape is decided on exact, case-sensitive top-level keys ("Records" versus
// "namespace"/"name"), because encoding/json matches struct fields case-insensitively
// and a body carrying both shapes must be refused rather than half-read.
func parse(body []byte) (target, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return target{}, errors.New("body is not a JSON object")
	}
	records, isEvent := top["Records"]
	_, hasNamespace := top["namespace"]
	_, hasName := top["name"]
	switch {
	case isEvent && (hasNamespace || hasName):
		return target{}, errors.New(`body mixes a direct request ("namespace", "name") with an S3 event ("Records")`)
	case isEvent:
		return parseEvent(records)
	case hasNamespace || hasName:
		return parseDirect(top["namespace"], top["name"])
	default:
		return target{}, errors.New(`body is neither {"namespace","name"} nor an S3 event with "Records"`)
	}
}

func parseDirect(rawNamespace, rawName json.RawMessage) (target, error) {
	var key types.NamespacedName
	if err := unmarshalString(rawNamespace, &key.Namespace); err != nil {
		return target{}, errors.New(`"namespace" must be a string`)
	}
	if err := unmarshalString(rawName, &key.Name); err != nil {
		return target{}, errors.New(`"name" must be a string`)
	}
	switch {
	case key.Namespace == "":
		return target{}, errors.New(`"namespace" is empty`)
	case key.Name == "":
		return target{}, errors.New(`"name" is empty`)
	case len(validation.IsDNS1123Label(key.Namespace)) > 0:
		return target{}, errors.New(`"namespace" is not a valid namespace name (DNS-1123 label)`)
	case len(validation.IsDNS1123Subdomain(key.Name)) > 0:
		return target{}, errors.New(`"name" is not a valid object name (DNS-1123 subdomain)`)
	}
	return target{key: &key}, nil
}

// unmarshalString decodes a JSON string; an absent or null value leaves dst empty.
func unmarshalString(raw json.RawMessage, dst *string) error {
	if raw == nil {
		return nil
	}
	return json.Unmarshal(raw, dst)
}

func parseEvent(raw json.RawMessage) (target, error) {
	var records []s3Record
	if err := json.Unmarshal(raw, &records); err != nil {
		return target{}, errors.New(`"Records" must be an array of S3 event records`)
	}
	if len(records) == 0 {
		return target{}, errors.New(`"Records" is empty`)
	}
	var buckets []string
	seen := map[string]bool{}
	canaries := 0
	for i, rec := range records {
		if rec.S3 == nil || rec.S3.Bucket == nil || rec.S3.Bucket.Name == "" {
			return target{}, fmt.Errorf("record %d has no s3.bucket.name", i)
		}
		name := rec.S3.Bucket.Name
		// StorageBuckets can only carry valid names (the CRD enforces the same rules),
		// so an invalid one is a malformed request, not an unknown bucket.
		if naming.Validate(name) != nil {
			return target{}, fmt.Errorf("record %d: s3.bucket.name is not a valid bucket name", i)
		}
		if rec.S3.Object != nil && isCanaryKey(rec.S3.Object.Key) {
			canaries++
			continue
		}
		if seen[name] {
			continue
		}
		if len(buckets) == MaxBucketsPerRequest {
			return target{}, fmt.Errorf("event names more than %d distinct buckets; send at most %d per request", MaxBucketsPerRequest, MaxBucketsPerRequest)
		}
		seen[name] = true
		buckets = append(buckets, name)
	}
	if canaries == len(records) {
		return target{canaryOnly: true}, nil
	}
	return target{buckets: buckets}, nil
}
