package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/bucketkeeper/bucketkeeper/internal/localpeers"
)

// weedPortNames are every TCP port `weed mini` opens once WebDAV, the Iceberg and
// Lance catalogs, the legacy admin port and metrics are switched off. Each is
// passed explicitly: mini's defaults (9333, 8333, ...) would clash between
// parallel test packages, and a default it finds taken is silently moved.
var weedPortNames = []string{
	"master", "master.grpc",
	"volume", "volume.grpc",
	"filer", "filer.grpc",
	"s3", "s3.grpc",
	"admin", "admin.grpc", // admin server + worker gRPC: mini always starts them, even with -admin.ui=false
}

// configureWeed writes the static S3 identities file and builds the `weed mini`
// command line: everything bound to 127.0.0.1, no telemetry, no WebDAV, no admin
// UI, glog to stderr (the server log) instead of files in /tmp.
func (s *S3Server) configureWeed() error {
	ports, err := freePorts(len(weedPortNames))
	if err != nil {
		return err
	}
	s.ports = map[string]int{}
	for i, name := range weedPortNames {
		s.ports[name] = ports[i]
	}
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", s.ports["s3"])
	s.IAMEndpoint = s.Endpoint // weed serves IAM on the S3 port (POST /)

	dataDir := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(s.dir, "tmp"), 0o755); err != nil {
		return err
	}
	configPath := filepath.Join(s.dir, "s3.json")
	if err := writeJSON(configPath, weedS3Config(s)); err != nil {
		return err
	}
	// mini registers gRPC unix sockets at fixed /tmp paths keyed by port (not
	// configurable, not under TMPDIR); record them so Close and the stale-dir
	// sweep remove them.
	var sockets []string
	for _, svc := range []string{"master", "volume", "filer", "s3", "admin"} {
		sockets = append(sockets, fmt.Sprintf("/tmp/seaweedfs-%s-grpc-%d.sock", svc, s.ports[svc+".grpc"]))
	}
	if err := localpeers.AddCleanupPaths(s.dir, sockets...); err != nil {
		return err
	}

	p := func(name string) string { return fmt.Sprint(s.ports[name]) }
	s.args = []string{
		"-logtostderr=true",
		"-config_dir=" + s.dir, // no security.toml etc. from ~/.seaweedfs or /etc/seaweedfs
		"mini",
		"-dir=" + dataDir,
		"-ip=127.0.0.1",
		"-ip.bind=127.0.0.1",
		"-master.port=" + p("master"), "-master.port.grpc=" + p("master.grpc"),
		"-volume.port=" + p("volume"), "-volume.port.grpc=" + p("volume.grpc"),
		"-filer.port=" + p("filer"), "-filer.port.grpc=" + p("filer.grpc"),
		"-s3.port=" + p("s3"), "-s3.port.grpc=" + p("s3.grpc"),
		"-admin.port=" + p("admin"), "-admin.port.grpc=" + p("admin.grpc"),
		"-admin.port.legacy=0",
		"-s3.port.iceberg=0",
		"-s3.port.lance=0",
		"-webdav=false",
		"-admin.ui=false",
		"-master.telemetry=false",
		"-master.volumeSizeLimitMB=64", // smallest allowed: keeps sparse volume files small
		"-s3.config=" + configPath,
		// IAM API writes (CreateUser, keys, policies), and identities without the
		// Admin action may not manage even their own keys.
		"-s3.iam.readOnly=false",
		"-s3.iam.selfServiceRequiresGrant=true",
		"-filer.localSocket=" + filepath.Join(s.dir, "filer.sock"),
		"-s3.localSocket=" + filepath.Join(s.dir, "s3.sock"),
	}
	s.env = childEnv(filepath.Join(s.dir, "tmp"))
	return nil
}

// weedAdminReadyLine is the line weed mini's progress board prints (one per
// transition when its stdout is no terminal) once its admin server and the
// maintenance worker answer; nothing later in its start can fail.
var weedAdminReadyLine = regexp.MustCompile(`(?m)^\s+Admin\s+ready\b`)

// weedAdminReady reports whether log, what weed wrote since its latest start,
// says its admin server is up.
func weedAdminReady(log string) bool { return weedAdminReadyLine.MatchString(log) }

// weedStartFailure returns why weed, though its S3 port may already serve,
// will exit: its admin server failed (mini logs "Admin server error: ..." and
// fatals two minutes later). A port taken by another process is a bind
// conflict, which the start retries with fresh ports.
func weedStartFailure(log string) error {
	for _, line := range strings.Split(log, "\n") {
		i := strings.Index(line, "Admin server error:")
		if i < 0 {
			continue
		}
		if bindConflict(line) {
			return fmt.Errorf("%w: weed: %s", errBindConflict, line[i:])
		}
		return fmt.Errorf("weed: %s", line[i:])
	}
	return nil
}

// seaweedAccountID is the SeaweedFS account of the harness's main and scoped
// identities: the owner their buckets' ACLs name.
const seaweedAccountID = "bucketkeeper"

// weedS3Config is SeaweedFS's static identities file (-s3.config). Creating a
// bucket needs the Admin action, so both identities have it; they sit in
// different accounts, and a bucket records the identity that created it, so one
// identity's CreateBucket on the other's bucket gets BucketAlreadyExists.
//
// The third identity holds only actions of the form "Action:bucket", which
// SeaweedFS grants on that bucket alone. "Admin:bucket" is among them because
// the public-access block and policy writes need the Admin action; scoped to
// the bucket it still lets the identity create no bucket and see no other.
func weedS3Config(s *S3Server) any {
	type cred struct {
		AccessKey string `json:"accessKey"`
		SecretKey string `json:"secretKey"`
	}
	type account struct {
		ID          string `json:"id"`
		DisplayName string `json:"displayName"`
	}
	type identity struct {
		Name        string   `json:"name"`
		Credentials []cred   `json:"credentials"`
		Actions     []string `json:"actions"`
		Account     account  `json:"account"`
	}
	actions := []string{"Admin", "Read", "List", "Tagging", "Write"}
	var scoped []string
	for _, a := range actions {
		scoped = append(scoped, a+":"+s.ScopedBucket)
	}
	return map[string]any{"identities": []identity{
		{Name: "bucketkeeper-admin", Credentials: []cred{{s.AccessKeyID, s.SecretAccessKey}}, Actions: actions,
			Account: account{ID: seaweedAccountID, DisplayName: seaweedAccountID}},
		{Name: "other-tenant", Credentials: []cred{{s.OtherAccessKeyID, s.OtherSecretAccessKey}}, Actions: actions,
			Account: account{ID: "other-tenant", DisplayName: "other-tenant"}},
		{Name: "bucket-scoped", Credentials: []cred{{s.ScopedAccessKeyID, s.ScopedSecretAccessKey}}, Actions: scoped,
			Account: account{ID: seaweedAccountID, DisplayName: seaweedAccountID}},
	}}
}

// configureVersity builds the command lines of Versity's two processes: its
// standalone IAM service (the AWS IAM API on its own loopback port, its private
// API on a unix socket in the server's directory) and the S3 gateway, which asks
// that socket for keys and policy decisions. The gateway has one S3 listener on
// 127.0.0.1 (no admin API, no WebUI), root credentials from the environment
// (not visible in ps), and object metadata in a sidecar directory instead of
// xattrs so any filesystem works. The second account is created as an IAM user
// once both run (createOtherUser).
func (s *S3Server) configureVersity() error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	s.ports = map[string]int{"s3": ports[0], "iam": ports[1]}
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	s.IAMEndpoint = fmt.Sprintf("http://127.0.0.1:%d", ports[1])

	dirs := map[string]string{}
	for _, d := range []string{"root", "meta", "versions", "iam", "tmp"} {
		dirs[d] = filepath.Join(s.dir, d)
		if err := os.MkdirAll(dirs[d], 0o755); err != nil {
			return err
		}
	}
	socket := filepath.Join(s.dir, "iam.sock")
	s.iamLog = filepath.Join(s.dir, "iam.log")
	s.iamArgs = []string{
		"--port", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"--region", s.IAMRegion,
		"--health", "/healthz",
		"iam",
		"--dir", dirs["iam"],
		"--private-ports", socket,
	}
	s.args = []string{
		"--port", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--region", s.Region,
		"--health", "/healthz",
		"--iam-standalone-endpoint", socket,
		"posix",
		"--sidecar", dirs["meta"],
		"--versioning-dir", dirs["versions"],
		dirs["root"],
	}
	s.env = childEnv(dirs["tmp"],
		"ROOT_ACCESS_KEY_ID="+s.AccessKeyID,
		"ROOT_SECRET_ACCESS_KEY="+s.SecretAccessKey,
	)
	return s.makePrivateEtc() // for the IAM service, which serves STS
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
