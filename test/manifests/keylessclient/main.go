// Command keylessclient is the application of the install test's keyless step: it runs
// in a Pod with nothing but a keyless BucketAccess's Secret as its environment and a
// projected ServiceAccount token where the Secret says, and reaches its bucket through
// the AWS SDK's default configuration and credential chain, unchanged: whatever it
// gets, it gets as any application would.
//
//	keylessclient reach <other bucket>   write and read BUCKET_NAME, be refused the other
//	keylessclient read-only              read BUCKET_NAME's from-pod, be refused a write
//	keylessclient refused                fail to get any credentials at all
//
// It prints what happened, also into /dev/termination-log (the container's termination
// message, which the test reads from the Pod's status), and exits 0 when everything was
// as expected, 1 otherwise.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out strings.Builder
	err := run(ctx, &out, os.Args[1:])
	if err != nil {
		fmt.Fprintln(&out, "FAIL:", err)
	} else {
		fmt.Fprintln(&out, "OK")
	}
	fmt.Print(out.String())
	_ = os.WriteFile("/dev/termination-log", []byte(out.String()), 0)
	if err != nil {
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: keylessclient reach <other bucket> | refused")
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	if args[0] == "refused" {
		_, err := cfg.Credentials.Retrieve(ctx)
		if err == nil {
			return errors.New("the token got a session")
		}
		fmt.Fprintln(out, "no session, as expected:", err)
		return nil
	}
	if args[0] == "read-only" {
		return readOnly(ctx, out, cfg)
	}
	if args[0] != "reach" || len(args) != 2 {
		return fmt.Errorf("unknown arguments %q", args)
	}
	if _, ok := os.LookupEnv("AWS_ACCESS_KEY_ID"); ok {
		return errors.New("a key is in the environment")
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = os.Getenv("BUCKET_FORCE_PATH_STYLE") == "true" })
	bucket, other := os.Getenv("BUCKET_NAME"), args[1]
	body := []byte("written by a Pod with no key")
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("from-pod"), Body: bytes.NewReader(body)}); err != nil {
		return fmt.Errorf("writing its bucket: %w", err)
	}
	obj, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("from-pod")})
	if err != nil {
		return fmt.Errorf("reading its bucket: %w", err)
	}
	got, err := io.ReadAll(obj.Body)
	_ = obj.Body.Close()
	if err != nil || !bytes.Equal(got, body) {
		return fmt.Errorf("read back %q, %v", got, err)
	}
	fmt.Fprintln(out, "wrote and read", bucket)
	_, err = client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(other), Key: aws.String("intrusion"), Body: bytes.NewReader(body)})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "AccessDenied" {
		return fmt.Errorf("writing another bucket: %v, want AccessDenied", err)
	}
	fmt.Fprintln(out, "refused", other, "as expected")
	return nil
}

// readOnly reads the object the ReadWrite Pod wrote and is refused writing.
func readOnly(ctx context.Context, out io.Writer, cfg aws.Config) error {
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = os.Getenv("BUCKET_FORCE_PATH_STYLE") == "true" })
	bucket := os.Getenv("BUCKET_NAME")
	obj, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("from-pod")})
	if err != nil {
		return fmt.Errorf("reading its bucket: %w", err)
	}
	_ = obj.Body.Close()
	fmt.Fprintln(out, "read", bucket)
	_, err = client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("from-reader"), Body: strings.NewReader("x")})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "AccessDenied" {
		return fmt.Errorf("writing through a ReadOnly grant: %v, want AccessDenied", err)
	}
	fmt.Fprintln(out, "refused a write, as expected")
	return nil
}
