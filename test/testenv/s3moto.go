package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// moto stands in for AWS where only AWS's own behaviour is the subject: regions
// (LocationConstraint, us-east-1's 200 for a bucket created twice), IAM names
// and limits. It is an emulator, not a store: it proves nothing about data
// safety, and it keeps everything in memory, so a restart is no outage (Start
// after Stop is refused).
//
// It runs as `python3 -m moto.server` from the Debian root hack/peers/moto-root.sh
// unpacks, through the root's own loader with PYTHONHOME in the root: nothing is
// installed on the machine. Started with INITIAL_NO_AUTH_ACTION_COUNT=3, it
// takes three requests unsigned (the harness creates the admin IAM user, its
// allow-everything policy and its key with them) and from then on checks every
// signature and enforces IAM policies, as AWS does.

// motoAdmin is the IAM user whose key is the server's admin identity.
const motoAdmin = "bucketkeeper-admin"

// configureMoto picks the port and builds the command line. S3 and IAM share the
// port: moto routes a request by the service its signature names.
func (s *S3Server) configureMoto() error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	s.ports = map[string]int{"s3": ports[0]}
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	s.IAMEndpoint = s.Endpoint
	tmp := filepath.Join(s.dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	root := s.bin
	loaders, _ := filepath.Glob(filepath.Join(root, "usr/lib/*-linux-gnu/ld-linux*.so.*"))
	if len(loaders) != 1 {
		return fmt.Errorf("testenv: want one dynamic loader in %s, found %v", root, loaders)
	}
	s.motoCmd = loaders[0]
	s.args = []string{"--library-path", filepath.Dir(loaders[0]), filepath.Join(root, "usr/bin/python3"),
		"-m", "moto.server", "-H", "127.0.0.1", "-p", fmt.Sprint(ports[0])}
	s.env = childEnv(tmp,
		"PYTHONHOME="+filepath.Join(root, "usr"), "PYTHONNOUSERSITE=1", "PYTHONDONTWRITEBYTECODE=1",
		"INITIAL_NO_AUTH_ACTION_COUNT=3")
	return nil
}

// bootstrapMoto waits for moto's port, then spends its three unsigned requests on
// the admin identity: an IAM user, an inline policy allowing everything, and its
// access key, which becomes AccessKeyID. Nothing else may reach the server first,
// or it would use up one of the three.
func (s *S3Server) bootstrapMoto(p *Process) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	for {
		conn, err := net.DialTimeout("tcp", s.Endpoint[len("http://"):], time.Second)
		if err == nil {
			_ = conn.Close()
			break
		}
		select {
		case <-p.done:
			return errors.New("moto exited before it listened")
		case <-ctx.Done():
			return fmt.Errorf("moto did not listen within %s", readyTimeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
	c := iam.New(iam.Options{
		Region:       s.IAMRegion,
		BaseEndpoint: aws.String(s.IAMEndpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("bootstrap", "bootstrap", ""),
		HTTPClient:   loopbackHTTP,
		Retryer:      aws.NopRetryer{}, // a retry would spend one of the three
	})
	if _, err := c.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String(motoAdmin)}); err != nil {
		return fmt.Errorf("moto bootstrap: CreateUser: %w", err)
	}
	if _, err := c.PutUserPolicy(ctx, &iam.PutUserPolicyInput{UserName: aws.String(motoAdmin), PolicyName: aws.String("admin"),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`)}); err != nil {
		return fmt.Errorf("moto bootstrap: PutUserPolicy: %w", err)
	}
	out, err := c.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String(motoAdmin)})
	if err != nil {
		return fmt.Errorf("moto bootstrap: CreateAccessKey: %w", err)
	}
	s.AccessKeyID, s.SecretAccessKey = aws.ToString(out.AccessKey.AccessKeyId), aws.ToString(out.AccessKey.SecretAccessKey)
	return nil
}
