// Package quota sets and reads bucket quotas through a store's admin API, the one part
// of bucket configuration S3 has no call for. Each store that has such an API gets an
// implementation of Client named after it (rgw.go: Ceph RGW's admin-ops API;
// seaweedfs.go: SeaweedFS's quota extension on its S3 port), on a shared signed HTTP
// client (signed.go); a store
// without one has no Client, and the controllers report its buckets' quotas as
// NotSupportedByStore instead of pretending to apply them.
//
// Errors are *s3.Error values (s3.APIError), so the controllers' verdict table reads an
// admin API's refusals as it reads S3's.
//
// MinIO, Garage and RustFS have admin APIs with bucket quotas too; none is implemented
// (Garage and RustFS are not in the test harness; MinIO is, for S3 alone): a Client for
// one goes beside rgw.go, with the contract tests run against the real server.
package quota
