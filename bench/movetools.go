package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// storeBucket is one bucket of the move scenario.
type storeBucket struct {
	srv    *testenv.S3Server
	bucket string
}

func (b storeBucket) client() *awss3.Client { return b.srv.Client() }

func (b storeBucket) create(ctx context.Context) error {
	_, err := b.client().CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(b.bucket)})
	return err
}

// fill creates the source bucket with the scenario's objects: the small ones by 16
// writers, the large ones uploaded in parts of 8 MiB.
func (b storeBucket) fill(ctx context.Context) error {
	if err := b.create(ctx); err != nil {
		return err
	}
	c := b.client()
	err := parallel(16, moveSmall, func(i int) error {
		_, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(smallKey(i)),
			Body: bytes.NewReader(randomBytes(moveSmallSize)), ContentType: aws.String("application/octet-stream")})
		return err
	})
	if err != nil {
		return err
	}
	return parallel(2, moveLarge, func(i int) error {
		key := fmt.Sprintf("large/%02d.bin", i)
		up, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
		if err != nil {
			return err
		}
		var parts []types.CompletedPart
		for n := int32(1); n <= moveLargeSize/moveLargePart; n++ {
			out, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String(b.bucket), Key: aws.String(key), UploadId: up.UploadId,
				PartNumber: aws.Int32(n), Body: bytes.NewReader(randomBytes(moveLargePart))})
			if err != nil {
				return err
			}
			parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag})
		}
		_, err = c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String(b.bucket), Key: aws.String(key),
			UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
		return err
	})
}

func smallKey(i int) string { return fmt.Sprintf("small/%03d/%05d.bin", i%100, i) }

// change makes n changes on the source for round: 40% overwrites, 30% new keys, 30%
// deletions, each key touched once.
func (b storeBucket) change(ctx context.Context, round, n int) error {
	c := b.client()
	over, added := n*4/10, n*3/10
	return parallel(16, n, func(i int) error {
		var err error
		switch {
		case i < over:
			_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(smallKey(round*n + i)),
				Body: bytes.NewReader(randomBytes(moveSmallSize))})
		case i < over+added:
			_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(fmt.Sprintf("new/%d/%03d.bin", round, i)),
				Body: bytes.NewReader(randomBytes(moveSmallSize))})
		default:
			_, err = c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(smallKey(moveSmall/2 + round*n + i))})
		}
		return err
	})
}

// destroy empties and deletes the bucket, and has RGW free the deleted objects' data.
func (b storeBucket) destroy(ctx context.Context) error {
	c, err := s3.New(ctx, s3.Config{Endpoint: b.srv.Endpoint, Region: b.srv.Region, ForcePathStyle: true,
		AccessKeyID: b.srv.AccessKeyID, SecretAccessKey: b.srv.SecretAccessKey, RequestTimeout: time.Minute})
	if err != nil {
		return err
	}
	for {
		page, err := c.ListObjectVersions(ctx, b.bucket, nil)
		if err != nil {
			return err
		}
		if len(page.Versions) == 0 {
			break
		}
		ids := make([]s3.ObjectID, 0, len(page.Versions))
		for _, v := range page.Versions {
			ids = append(ids, s3.ObjectID{Key: v.Key, VersionID: v.VersionID})
		}
		if err := c.DeleteObjects(ctx, b.bucket, ids); err != nil {
			return err
		}
	}
	if err := c.DeleteBucket(ctx, b.bucket); err != nil {
		return err
	}
	return b.srv.CollectGarbage()
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// parallel runs do(0..n-1) on workers goroutines and returns the first error.
func parallel(workers, n int, do func(i int) error) error {
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
	for i := 0; i < n && err == nil; i++ {
		select {
		case next <- i:
		case err = <-errs:
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	return errors.Join(err, <-errs)
}

// rcloneBinary is Debian's rclone, unpacked into a cache by hack/peers/rclone.sh.
func rcloneBinary() (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "hack/peers/rclone.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/peers/rclone.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func rcloneVersion(bin string) string {
	out, _ := exec.Command(bin, "version").Output()
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(first)
}

// runRclone copies src into tgt with `rclone sync` at the scenario's concurrency. The
// remotes come from the environment (never the command line).
func runRclone(bin, dir string, src, tgt storeBucket) (*moveRun, error) {
	// Only rclone's own settings: the AWS SDK in rclone reads AWS_* variables of the
	// environment (a CA bundle it then fails to load into its transport, say).
	env := []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "RCLONE_CONFIG=" + filepath.Join(dir, "rclone-none.conf")}
	for name, b := range map[string]storeBucket{"SRC": src, "DST": tgt} {
		provider := map[testenv.S3Kind]string{testenv.SeaweedFS: "SeaweedFS", testenv.RGW: "Ceph"}[b.srv.Kind]
		p := "RCLONE_CONFIG_" + name + "_"
		env = append(env, p+"TYPE=s3", p+"PROVIDER="+provider, p+"ENDPOINT="+b.srv.Endpoint, p+"REGION="+b.srv.Region,
			p+"ACCESS_KEY_ID="+b.srv.AccessKeyID, p+"SECRET_ACCESS_KEY="+b.srv.SecretAccessKey, p+"FORCE_PATH_STYLE=true", p+"NO_CHECK_BUCKET=true")
	}
	n := strconv.Itoa(moveWorkers)
	secs, peak, err := runMeasured(bin, []string{"sync", "src:" + src.bucket, "dst:" + tgt.bucket, "--transfers", n, "--checkers", n, "-q"}, env, dir, "rclone.log")
	if err != nil {
		return nil, err
	}
	return rates(&moveRun{Seconds: secs, PeakRSSBytes: peak, Objects: moveSmall + moveLarge, Bytes: moveSmall*moveSmallSize + moveLarge*moveLargeSize}), nil
}

func rates(r *moveRun) *moveRun {
	r.ObjectsPerSecond = float64(r.Objects) / r.Seconds
	r.MiBPerSecond = float64(r.Bytes) / (1 << 20) / r.Seconds
	return r
}

// runMeasured runs a program to its end and returns how long it took and its peak
// resident set (sampled every 100 ms).
func runMeasured(bin string, args, env []string, dir, log string) (float64, float64, error) {
	start := time.Now()
	p, err := testenv.StartProcess(bin, args, env, dir, filepath.Join(dir, log))
	if err != nil {
		return 0, 0, err
	}
	var peak float64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-p.Done():
			done = true
		case <-tick.C:
			if _, hwm := (&manager{Process: p}).rss(); hwm > peak {
				peak = hwm
			}
		}
	}
	secs := time.Since(start).Seconds()
	if err := p.Err(); err != nil {
		return 0, 0, fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), args[0], err, testenv.Tail(readText(filepath.Join(dir, log)), 3000))
	}
	return secs, peak, nil
}

func readText(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// moverRuns runs passes of one move with the real mover subcommand, each shard a
// process, as the Pods of an Indexed Job.
type moverRuns struct {
	e        *env
	dir      string
	specs    mover.Spec
	cps      *mover.ConfigMapCheckpoints
	last     mover.Progress
	shards   int
	src, tgt storeBucket
}

func (e *env) newMoverRuns(src, tgt storeBucket, id string) *moverRuns {
	m := &moverRuns{e: e, src: src, tgt: tgt, dir: filepath.Join(e.dir, id), shards: 1,
		cps: &mover.ConfigMapCheckpoints{Client: e.k8s, Namespace: "bench-system"}}
	bucket := func(b storeBucket) mover.Bucket {
		return mover.Bucket{Endpoint: b.srv.Endpoint, Region: b.srv.Region, ForcePathStyle: true, Bucket: b.bucket}
	}
	source := bucket(src)
	source.SendsTagCount = true // SeaweedFS does (internal/s3's contract case)
	m.specs = mover.Spec{MoveID: id, Source: source, Target: bucket(tgt), Limits: mover.Limits{Concurrency: moveWorkers}}
	return m
}

// copyAll copies the whole bucket in shards shards (a plan pass first when more than
// one) and returns the copy's figures.
func (m *moverRuns) copyAll(ctx context.Context, shards int) (*moveRun, error) {
	var planSecs float64
	if shards > 1 {
		m.specs.Shards = shards
		run, err := m.pass(ctx, mover.ModePlan, 0)
		if err != nil {
			return nil, err
		}
		planSecs = run.Seconds
		cp, err := m.cps.Load(ctx, m.specs.MoveID, mover.PlanShard)
		if err != nil || cp == nil || cp.Plan == nil {
			return nil, fmt.Errorf("no plan: %v", err)
		}
		m.specs.Boundaries = cp.Plan.Boundaries
		fmt.Printf("   plan: %d objects, boundaries %q\n", cp.Plan.Objects, cp.Plan.Boundaries)
	}
	m.shards = m.specs.ShardCount()
	run, err := m.pass(ctx, mover.ModeCopy, 0)
	if err != nil {
		return nil, err
	}
	run.PlanSeconds = planSecs
	run.Objects, run.Bytes, run.WrittenBytes = m.last.Counts.CopiedObjects, m.last.Counts.CopiedBytes, m.last.Moved.WrittenBytes
	if m.last.Failures.Count != 0 {
		return nil, fmt.Errorf("copy failures: %s", m.last.Failures)
	}
	return rates(run), nil
}

// pass runs the move's next pass in mode, every shard a process at once, and returns
// its wall time and the largest peak RSS of its processes.
func (m *moverRuns) pass(ctx context.Context, mode mover.Mode, _ int) (*moveRun, error) {
	m.specs.Pass++
	m.specs.Mode = mode
	if err := os.MkdirAll(filepath.Join(m.dir, "credentials"), 0o700); err != nil {
		return nil, err
	}
	data, err := json.Marshal(m.specs)
	if err != nil {
		return nil, err
	}
	specFile := filepath.Join(m.dir, fmt.Sprintf("spec-%d.json", m.specs.Pass))
	if err := os.WriteFile(specFile, data, 0o600); err != nil {
		return nil, err
	}
	creds := mover.Credentials{AccessKeyID: m.src.srv.AccessKeyID, SecretAccessKey: m.src.srv.SecretAccessKey}
	tcreds := mover.Credentials{AccessKeyID: m.tgt.srv.AccessKeyID, SecretAccessKey: m.tgt.srv.SecretAccessKey}
	for name, v := range mover.CredentialsData(creds, tcreds) {
		if err := os.WriteFile(filepath.Join(m.dir, "credentials", name), v, 0o600); err != nil {
			return nil, err
		}
	}
	shards := m.specs.RunShards()
	start := time.Now()
	var mu sync.Mutex
	var peak float64
	err = parallel(shards, shards, func(i int) error {
		_, p, err := runMeasured(m.e.bin, []string{"mover", "--spec", specFile, "--credentials", filepath.Join(m.dir, "credentials"),
			"--kubeconfig", m.e.kubeconfig, "--checkpoint-namespace", "bench-system", "--shard", strconv.Itoa(i), "--zap-log-level", "error"},
			nil, m.dir, fmt.Sprintf("mover-%d-%d.log", m.specs.Pass, i))
		mu.Lock()
		peak = max(peak, p)
		mu.Unlock()
		return err
	})
	if err != nil {
		return nil, err
	}
	secs := time.Since(start).Seconds()
	cps, err := m.cps.List(ctx, m.specs.MoveID)
	if err != nil {
		return nil, err
	}
	if mode != mover.ModePlan {
		m.last = mover.Summarize(cps, m.specs.Pass, shards, time.Now())
	}
	return &moveRun{Seconds: secs, PeakRSSBytes: peak}, nil
}
