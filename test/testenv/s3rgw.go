package testenv

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/localpeers"
)

// Ceph RGW runs as a real single-host Ceph cluster: one monitor, one OSD whose
// object store is memory (memstore) and the radosgw gateway, all three programs of
// the Debian root filesystem that hack/peers/rgw-root.sh unpacks. They run
// through that root's own dynamic loader and libraries, with every plugin, data,
// run, log and socket path pointed into the server's temp dir by its ceph.conf:
// nothing is chrooted or mounted, so a killed test leaves no mount behind, only
// processes that die with it (Pdeathsig) and a dir the next start sweeps.
//
// No cephx (auth none), no msgr2, no manager: a test store needs none of them,
// and each costs start time. The monitor and the OSD run for the server's whole
// life: memstore keeps objects in the OSD's memory, so they would be lost with
// it. An outage (Stop, Start) stops and starts radosgw alone, which keeps every
// bucket and object.

// rgwBootTimeout bounds the cluster's creation (mkfs of monitor and OSD, their
// start, the first radosgw-admin call, which waits for the OSD and creates
// RGW's pools) before the start fails with the logs' tails.
const rgwBootTimeout = 2 * time.Minute

// rgwName is the gateway's Ceph entity name (client.<id>).
const rgwName = "client.rgw.bucketkeeper"

// rgwCluster is the part of an RGW server that outlives outages: the root it
// runs from, its monitor and its OSD.
type rgwCluster struct {
	root string // the unpacked Debian root
	conf string // ceph.conf in the server's dir
	mon  *Process
	osd  *Process
}

// rgwCommand returns how to run one program of the root: the root's loader
// (never the machine's: its libc must match) with the root's library dirs.
func rgwCommand(root, prog string, args ...string) (string, []string, error) {
	loaders, _ := filepath.Glob(filepath.Join(root, "usr/lib/*-linux-gnu/ld-linux*.so.*"))
	if len(loaders) != 1 {
		return "", nil, fmt.Errorf("testenv: want one dynamic loader in %s, found %v", root, loaders)
	}
	lib := filepath.Dir(loaders[0]) // usr/lib/<triplet>: Debian's libraries are all under usr
	libPath := lib + ":" + filepath.Join(lib, "ceph")
	return loaders[0], append([]string{"--library-path", libPath, filepath.Join(root, "usr/bin", prog)}, args...), nil
}

// configureRGW picks the monitor's and the gateway's ports and writes ceph.conf.
// The OSD binds in Ceph's own port range (6800-7568, below the ephemeral range),
// taking the first free ports there, so side-by-side servers do not collide.
func (s *S3Server) configureRGW() error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	s.ports = map[string]int{"s3": ports[0], "mon": ports[1]}
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	s.IAMEndpoint = s.Endpoint // RGW serves IAM on the S3 port (POST /)
	for _, d := range []string{"mon", "osd", "rgw", "run", "tmp", "crash"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o755); err != nil {
			return err
		}
	}
	c := s.rgw
	c.conf = filepath.Join(s.dir, "ceph.conf")
	conf := rgwConf(s.dir, c.root, ports[1], ports[0], s.opts.RGWMemoryBytes)
	if s.opts.RGWSTS {
		conf += rgwSTSConf()
	}
	if err := os.WriteFile(c.conf, []byte(conf), 0o600); err != nil {
		return err
	}
	s.bin, s.args, err = rgwCommand(c.root, "radosgw", "-d", "-c", c.conf, "-n", rgwName, "--no-mon-config")
	if err != nil {
		return err
	}
	s.env = childEnv(filepath.Join(s.dir, "tmp"))
	if err := s.makePrivateEtc(); err != nil {
		return err
	}
	s.bin, s.args = s.inPrivateEtc(s.bin, s.args)
	return nil
}

// rgwConf is the cluster's ceph.conf. Every path is in dir or in the root; every
// address is 127.0.0.1.
func rgwConf(dir, root string, monPort, s3Port int, memory int64) string {
	if memory <= 0 {
		memory = 1 << 30
	}
	lib := filepath.Join(root, "usr/lib/x86_64-linux-gnu")
	if loaders, _ := filepath.Glob(filepath.Join(root, "usr/lib/*-linux-gnu/ceph")); len(loaders) == 1 {
		lib = filepath.Dir(loaders[0])
	}
	return fmt.Sprintf(`[global]
fsid = %[1]s
mon host = v1:127.0.0.1:%[2]d
public addr = 127.0.0.1
cluster addr = 127.0.0.1
# Loopback only, the v1 protocol only, no cephx keys to create and pass around.
ms bind msgr2 = false
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
keyring = %[3]s/keyring

# The root's plugins and object classes, not the machine's (it has none).
plugin dir = %[4]s/ceph
erasure code dir = %[4]s/ceph/erasure-code
osd class dir = %[4]s/rados-classes

# Everything a daemon writes goes into the server's dir; logs go to stderr (-d).
run dir = %[3]s/run
admin socket = %[3]s/run/$name.asok
pid file = %[3]s/run/$name.pid
crash dir = %[3]s/crash
log to file = false
log file = %[3]s/run/$name.log
mon cluster log to file = false

# One OSD holding one copy of everything, in memory, with few placement groups.
osd objectstore = memstore
memstore device bytes = %[7]d
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
mon osd auto mark in = true
mon data avail crit = 0
mon data avail warn = 0
# Each pool RGW creates takes several map epochs, by default one a second each.
paxos propose interval = 0.02
paxos min wait = 0.001
# No disk to measure: the OSD's start-up benchmark only costs seconds.
osd mclock skip benchmark = true

[mon]
mon data = %[3]s/mon

[osd]
osd data = %[3]s/osd

[%[5]s]
rgw frontends = beast endpoint=127.0.0.1:%[6]d
rgw data = %[3]s/rgw
# Few threads (the default is 512); usage logged for the admin-ops API; no
# background resharding or multisite sync.
rgw thread pool size = 32
rgw enable usage log = true
rgw dynamic resharding = false
rgw run sync thread = false
# No metadata cache: the gateway then never asks its peers (over watch/notify) to
# drop cached entries. After an outage (radosgw is killed) the dead gateway's
# watches would stay until the OSD times them out, and every bucket deletion
# would wait ~30 s for them. Changes made with radosgw-admin also show at once.
rgw cache enabled = false
`, newUUID(), monPort, dir, lib, rgwName, s3Port, memory)
}

// newUUID returns a random (version 4) UUID, the cluster's fsid.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// bootRGWCluster creates the monitor's and the OSD's stores, starts both, and
// creates the accounts and users the tests sign with. radosgw-admin talks to the
// cluster directly (not to the gateway), and its first call waits for the OSD to
// come up and creates RGW's pools; the gateway starts afterwards (startLocked).
func (s *S3Server) bootRGWCluster() error {
	ctx, cancel := context.WithTimeout(context.Background(), rgwBootTimeout)
	defer cancel()
	c := s.rgw
	monmap, osdmap := filepath.Join(s.dir, "monmap"), filepath.Join(s.dir, "osdmap")
	steps := []struct {
		log  string
		prog string
		args []string
	}{
		{"mkfs.log", "monmaptool", []string{"--create", "--clobber", "--addv", "a", fmt.Sprintf("[v1:127.0.0.1:%d]", s.ports["mon"]), monmap}},
		// An OSD map that already holds osd.0, so no monitor command has to add it.
		{"mkfs.log", "osdmaptool", []string{"--createsimple", "1", "--clobber", osdmap}},
		{"mkfs.log", "ceph-mon", []string{"-c", c.conf, "-i", "a", "--no-mon-config", "--mkfs", "--monmap", monmap, "--osdmap", osdmap}},
		{"mkfs.log", "ceph-osd", []string{"-c", c.conf, "-i", "0", "--no-mon-config", "--mkfs"}},
	}
	for _, st := range steps {
		if err := s.runRGWTool(ctx, st.log, st.prog, st.args...); err != nil {
			return err
		}
	}
	var err error
	if c.mon, err = s.startRGWDaemon("mon.log", "ceph-mon", "-d", "-c", c.conf, "-i", "a", "--no-mon-config"); err != nil {
		return err
	}
	if c.osd, err = s.startRGWDaemon("osd.log", "ceph-osd", "-d", "-c", c.conf, "-i", "0", "--no-mon-config"); err != nil {
		return errors.Join(err, s.stopRGWClusterLocked())
	}
	if err := s.createRGWIdentities(ctx); err != nil {
		if bindConflict(localpeers.LogTail(filepath.Join(s.dir, "mon.log"))) {
			err = fmt.Errorf("%w: %v", errBindConflict, err)
		}
		return errors.Join(err, s.stopRGWClusterLocked())
	}
	c.mon.Serving()
	c.osd.Serving()
	return nil
}

// startRGWDaemon starts a cluster daemon of the root with its log in the dir.
func (s *S3Server) startRGWDaemon(log, prog string, args ...string) (*Process, error) {
	bin, argv, err := rgwCommand(s.rgw.root, prog, args...)
	if err != nil {
		return nil, err
	}
	return StartProcess(bin, argv, s.env, s.dir, filepath.Join(s.dir, log))
}

// runRGWTool runs a tool of the root to its end, within ctx; it fails early when
// the monitor or the OSD dies meanwhile, since the tool would wait for them.
func (s *S3Server) runRGWTool(ctx context.Context, log, prog string, args ...string) error {
	p, err := s.startRGWDaemon(log, prog, args...)
	if err != nil {
		return err
	}
	var died string
	select {
	case <-p.done:
		if p.err == nil {
			return nil
		}
		err = p.err
	case <-ctx.Done():
		err = fmt.Errorf("not done after %s", rgwBootTimeout)
	case <-s.rgw.daemonDone("mon"):
		died, err = "mon.log", errors.New("the monitor exited")
	case <-s.rgw.daemonDone("osd"):
		died, err = "osd.log", errors.New("the OSD exited")
	}
	_ = p.Stop()
	err = fmt.Errorf("testenv: rgw: %s %s: %w\n--- tail of %s ---\n%s", prog, redactSecretArgs(args), err, log, localpeers.LogTail(filepath.Join(s.dir, log)))
	if died != "" {
		err = fmt.Errorf("%w\n--- tail of %s ---\n%s", err, died, localpeers.LogTail(filepath.Join(s.dir, died)))
	}
	return err
}

// daemonDone is closed when the named daemon has exited; nil (never ready in a
// select) while it was not started.
func (c *rgwCluster) daemonDone(name string) <-chan struct{} {
	p := map[string]*Process{"mon": c.mon, "osd": c.osd}[name]
	if p == nil {
		return nil
	}
	return p.done
}

// stopRGWClusterLocked kills the OSD and the monitor. Their data is thrown away
// (Close, or a failed start), so there is nothing to shut down cleanly.
func (s *S3Server) stopRGWClusterLocked() error {
	if s.rgw == nil {
		return nil
	}
	for _, p := range []*Process{s.rgw.osd, s.rgw.mon} {
		if p != nil {
			p.Abort()
		}
	}
	s.rgw.osd, s.rgw.mon = nil, nil
	return nil
}

// createRGWIdentities creates, with radosgw-admin, the identities the harness
// hands out: the root user of our account (AccessKeyID: S3, and IAM on the S3
// port, which only an account's root or its IAM users speak), the root user of a
// second, independent account (OtherAccessKeyID), and a user outside any account
// with the admin capabilities for bucket stats, usage and quotas (the admin-ops
// API under /admin/, AdminOpsAccessKeyID), which is no S3 admin: it owns and sees
// no bucket. The keys are the harness's random ones, given on the command line.
//
// The first call sets up RGW's zone and pools, so it runs alone; the rest run side
// by side, one chain per identity (each call costs a cluster connection, ~0.5 s).
func (s *S3Server) createRGWIdentities(ctx context.Context) error {
	ours, others := rgwAccountID(), rgwAccountID()
	s.BucketOwnerID, s.OtherAccountID = ours, others
	chains := [][][]string{
		{{"user", "create", "--uid", "bucketkeeper-root", "--display-name", "bucketkeeper", "--account-id", ours,
			"--account-root", "--access-key", s.AccessKeyID, "--secret-key", s.SecretAccessKey}},
		{{"account", "create", "--account-id", others, "--account-name", otherUser},
			{"user", "create", "--uid", otherUser + "-root", "--display-name", otherUser, "--account-id", others,
				"--account-root", "--access-key", s.OtherAccessKeyID, "--secret-key", s.OtherSecretAccessKey}},
		{{"user", "create", "--uid", "bucketkeeper-adminops", "--display-name", "bucketkeeper admin ops",
			"--caps", rgwAdminOpsCaps, "--access-key", s.AdminOpsAccessKeyID, "--secret-key", s.AdminOpsSecretAccessKey}},
	}
	admin := func(args []string) error {
		return s.runRGWTool(ctx, "admin.log", "radosgw-admin", append([]string{"-c", s.rgw.conf, "--no-mon-config"}, args...)...)
	}
	if err := admin([]string{"account", "create", "--account-id", ours, "--account-name", "bucketkeeper"}); err != nil {
		return err
	}
	errs := make([]error, len(chains))
	var wg sync.WaitGroup
	for i, chain := range chains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, args := range chain {
				if errs[i] = admin(args); errs[i] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// CollectGarbage (RGW only) frees now what deleted objects leave behind: RGW deletes
// the tails of large objects (past their first 4 MiB) in its garbage collection, two
// hours later by default, and until then they fill the in-memory store.
func (s *S3Server) CollectGarbage() error {
	if s.Kind != RGW {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), rgwBootTimeout)
	defer cancel()
	return s.runRGWTool(ctx, "admin.log", "radosgw-admin", "-c", s.rgw.conf, "--no-mon-config", "gc", "process", "--include-all")
}

// rgwAdminOpsCaps are the admin-ops user's capabilities: read and change buckets
// (stats, quotas, ownership) and users (quotas), read usage and metadata.
const rgwAdminOpsCaps = "buckets=*;users=*;usage=read;metadata=read;info=read"

// rgwAccountID returns a random RGW account ID: "RGW" and 17 digits.
func rgwAccountID() string {
	return "RGW" + randomString(17, "0123456789")
}

// redactSecretArgs joins a command's arguments for an error message, without the
// value of --secret-key.
func redactSecretArgs(args []string) string {
	out := append([]string(nil), args...)
	for i := range out {
		if i > 0 && out[i-1] == "--secret-key" {
			out[i] = "[REDACTED]"
		}
	}
	return strings.Join(out, " ")
}

// ClusterPIDs returns the PIDs of the processes that run for the server's whole
// life, outages included (RGW's monitor and OSD); none for other kinds or once
// closed.
func (s *S3Server) ClusterPIDs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pids []int
	if s.rgw == nil {
		return nil
	}
	for _, p := range []*Process{s.rgw.mon, s.rgw.osd} {
		if p != nil && !p.Exited() {
			pids = append(pids, p.PID())
		}
	}
	return pids
}

// rgwStartFailure reads log, what the gateway wrote since its latest start, and returns an
// error when its frontend failed (a taken port: "failed to bind address ...:
// Address already in use"), which the gateway outlives by ~30 s.
func rgwStartFailure(log string) error {
	if !strings.Contains(log, "failed initializing frontend") {
		return nil
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "failed to bind") {
			return fmt.Errorf("radosgw: %s", line[strings.Index(line, "failed to bind"):])
		}
	}
	return errors.New("radosgw: its frontend failed to start")
}
