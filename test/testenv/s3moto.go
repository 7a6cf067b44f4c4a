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
// It runs moto's server (motoMain) with the python3 of the Debian root hack/peers/moto-root.sh
// unpacks, through the root's own loader with PYTHONHOME in the root: nothing is
// installed on the machine. Started with INITIAL_NO_AUTH_ACTION_COUNT=3, it
// takes three requests unsigned (the harness creates the admin IAM user, its
// allow-everything policy and its key with them) and from then on checks every
// signature and enforces IAM policies, as AWS does.

// motoAdmin is the IAM user whose key is the server's admin identity.
const motoAdmin = "bucketkeeper-admin"

// motoMain starts moto's server after correcting, in moto's own table of which IAM
// action authorizes which S3 request, the rows where moto 5.1 differs from what AWS
// documents. Without them an identity holding exactly AWS's permissions is refused
// on moto:
//   - HeadBucket needs s3:ListBucket on AWS; moto asks for s3:HeadBucket, which is
//     no AWS action;
//   - the public-access block (GET, PUT, DELETE ?publicAccessBlock) needs
//     s3:GetBucketPublicAccessBlock or s3:PutBucketPublicAccessBlock (DELETE too) on
//     AWS; moto's table misses the query key the SDKs send, and asks for
//     s3:ListBucket, s3:CreateBucket and s3:DeleteBucket instead;
//   - DeleteObjects is authorized on AWS per object, as s3:DeleteObject (or
//     s3:DeleteObjectVersion for a version) on the object's ARN; moto asks for
//     s3:DeleteObject on the bucket's ARN, which no policy granting object actions on
//     bucket/* matches. The patch asks, for each object, what AWS asks, and refuses
//     the whole request if any is refused (AWS would answer per object; the tests
//     never mix).
//
// It also corrects moto's check of a signature: moto rebuilds the canonical query
// from the URL as its web framework hands it over, with "/" in a value no longer
// encoded, so any request with a "/" in a query value (ListObjectVersions of a key
// under a prefix, as a purge sends) fails with SignatureDoesNotMatch. AWS
// canonicalizes every value with the SigV4 encoding, which the patch applies before
// moto signs its copy.
//
// And it lets AssumeRoleWithWebIdentity (and AssumeRoleWithSAML) through unsigned, as
// AWS does: their caller has no key yet, only a token. moto 5.1 checks them like any
// other call once it checks signatures, and fails with a 500 (no Authorization header).
const motoMain = `import sys
from urllib.parse import parse_qsl, quote, urlsplit
import moto.iam.access_control as ac
create = ac.IAMRequestBase._create_aws_request
def _create_aws_request(self):
    parts = urlsplit(self._path)
    if parts.query:
        enc = lambda v: quote(v, safe="-_.~")
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        self._path = parts.path + "?" + "&".join(enc(k) + "=" + enc(v) for k, v in pairs)
    return create(self)
ac.IAMRequestBase._create_aws_request = _create_aws_request
import xmltodict
import moto.s3.responses as r
authorize = r.S3Response._authenticate_and_authorize_s3_action
def _authorize(self, bucket_name=None, key_name=None):
    if key_name is None and self.data.get("Action") == "DeleteObject" and self.is_delete_keys():
        objs = xmltodict.parse(self.body, strip_whitespace=False)["Delete"].get("Object", [])
        objs = objs if isinstance(objs, list) else [objs]
        if not objs:
            return authorize(self, bucket_name=bucket_name)
        for o in objs:
            self.data["Action"] = "DeleteObjectVersion" if o.get("VersionId") else "DeleteObject"
            authorize(self, bucket_name=bucket_name, key_name=o["Key"])
        self.data["Action"] = "DeleteObject"
        return
    return authorize(self, bucket_name=bucket_name, key_name=key_name)
r.S3Response._authenticate_and_authorize_s3_action = _authorize
m = r.ACTION_MAP["BUCKET"]
m["HEAD"]["DEFAULT"] = "ListBucket"
m["GET"]["publicAccessBlock"] = "GetBucketPublicAccessBlock"
m["PUT"]["publicAccessBlock"] = "PutBucketPublicAccessBlock"
m["DELETE"]["publicAccessBlock"] = "PutBucketPublicAccessBlock"
import moto.sts.responses as sts
sts_auth = sts.TokenResponse._authenticate_and_authorize_normal_action
def _sts_auth(self, resource="*"):
    if self._get_action() in ("AssumeRoleWithWebIdentity", "AssumeRoleWithSAML"):
        return
    return sts_auth(self, resource)
sts.TokenResponse._authenticate_and_authorize_normal_action = _sts_auth
from moto.server import main
main(sys.argv[1:])
`

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
		"-c", motoMain, "-H", "127.0.0.1", "-p", fmt.Sprint(ports[0])}
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
