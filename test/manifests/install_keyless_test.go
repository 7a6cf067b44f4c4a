package manifests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// The install test's keyless step: on the real node, a Pod with a projected
// ServiceAccount token and no key anywhere reaches its bucket on Ceph RGW through the
// AWS SDK's default chain (./keylessclient), and is refused another bucket; a Pod of a
// ReadOnly access reads and cannot write; a Pod of another ServiceAccount mounting the
// first Secret gets no session.

const (
	keylessImage    = "docker.io/library/bucketkeeper-keyless-client:test"
	keylessAudience = "rgw.bucketkeeper.test"
)

// buildKeylessClientImage builds ./keylessclient into a one-binary image.
func buildKeylessClientImage(t *testing.T, dir string) (string, error) {
	bin := filepath.Join(dir, "keylessclient")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./keylessclient")
	cmd.Dir, cmd.Env = filepath.Join(repoRoot(t), "test", "manifests"), append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./keylessclient: %v\n%s", err, out)
	}
	tarball := filepath.Join(dir, "keylessclient.tar")
	return tarball, testenv.WriteImageArchive(tarball, keylessImage,
		testenv.ImageConfig{Entrypoint: []string{"/keylessclient"}, User: "65532:65532"},
		testenv.ImageFile{Path: "/keylessclient", Source: bin, Mode: 0o755})
}

// keyless runs the keyless step against rgw, which trusts the cluster's issuer.
func (in *installer) keyless(rgw *testenv.S3Server, issuer *testenv.Issuer, image string) {
	in.t.Helper()
	if err := in.cluster.ImportImage(image); err != nil {
		in.t.Fatal(err)
	}
	endpoint, err := in.cluster.Expose(strings.TrimPrefix(rgw.Endpoint, "http://"))
	if err != nil {
		in.t.Fatal(err)
	}
	in.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "rgw-creds"},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: rgw.AccessKeyID, bkv1.CredentialsKeySecretAccessKey: rgw.SecretAccessKey}})
	// The operator's Pods cannot resolve the test issuer's name: the thumbprint is given.
	in.create(&bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "rgw"}, Spec: bkv1.ObjectStoreSpec{
		Endpoint: "http://" + endpoint, Region: rgw.Region, ForcePathStyle: true,
		CredentialsSecretRef: &bkv1.SecretReference{Namespace: namespace, Name: "rgw-creds"},
		AccessProvider: &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM, WebIdentity: &bkv1.WebIdentity{
			Issuer: issuer.URL, Audience: keylessAudience, Thumbprints: []string{issuer.Thumbprint}}},
	}})
	in.eventually(3*time.Minute, "ObjectStore rgw trusting the cluster's tokens", func() error {
		store := &bkv1.ObjectStore{}
		if err := in.c.Get(in.ctx, client.ObjectKey{Name: "rgw"}, store); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(store.Status.Conditions, bkv1.ConditionWebIdentityReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("condition WebIdentityReady: %+v", c)
		}
		return nil
	})
	const ns = "keyless"
	in.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	buckets := map[string]string{}
	for _, name := range []string{"mine", "theirs"} {
		in.create(&bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: "rgw"}}})
		in.eventually(3*time.Minute, "StorageBucket "+name+" Ready", func() error {
			sb := &bkv1.StorageBucket{}
			if err := in.c.Get(in.ctx, client.ObjectKey{Namespace: ns, Name: name}, sb); err != nil {
				return err
			}
			if c := apimeta.FindStatusCondition(sb.Status.Conditions, bkv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("condition Ready: %+v", c)
			}
			buckets[name] = sb.Status.BucketName
			return nil
		})
	}
	for _, sa := range []string{"app", "reader", "intruder"} {
		in.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})
	}
	for _, a := range []struct {
		name string
		mode bkv1.AccessMode
	}{{"app", bkv1.AccessReadWrite}, {"reader", bkv1.AccessReadOnly}} {
		in.create(&bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: a.name}, Spec: bkv1.BucketAccessSpec{
			Buckets: []bkv1.BucketGrant{{Name: "mine", Mode: a.mode}}, SecretName: a.name + "-s3", ServiceAccountName: a.name}})
		in.eventually(3*time.Minute, "BucketAccess "+a.name+" Ready", func() error {
			ba := &bkv1.BucketAccess{}
			if err := in.c.Get(in.ctx, client.ObjectKey{Namespace: ns, Name: a.name}, ba); err != nil {
				return err
			}
			if c := apimeta.FindStatusCondition(ba.Status.Conditions, bkv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("condition Ready: %+v", c)
			}
			return nil
		})
	}
	secret := &corev1.Secret{}
	if err := in.c.Get(in.ctx, client.ObjectKey{Namespace: ns, Name: "app-s3"}, secret); err != nil {
		in.t.Fatal(err)
	}
	if _, ok := secret.Data[bkv1.AccessSecretKeySecretKey]; ok {
		in.t.Fatal("the keyless access's Secret holds a secret key")
	}

	if got := in.runClient(ns, "app", "app-s3", "reach", buckets["theirs"]); !strings.Contains(got, "wrote and read "+buckets["mine"]) || !strings.Contains(got, "refused "+buckets["theirs"]) {
		in.t.Errorf("the keyless Pod reported: %q", got)
	}
	if got := in.runClient(ns, "reader", "reader-s3", "read-only"); !strings.Contains(got, "refused a write") {
		in.t.Errorf("the ReadOnly Pod reported: %q", got)
	}
	if got := in.runClient(ns, "intruder", "app-s3", "refused"); !strings.Contains(got, "no session") {
		in.t.Errorf("the other ServiceAccount's Pod reported: %q", got)
	}
	if _, err := rgw.Client().HeadObject(in.ctx, &s3.HeadObjectInput{Bucket: aws.String(buckets["mine"]), Key: aws.String("from-pod")}); err != nil {
		in.t.Errorf("the object the keyless Pod wrote: %v", err)
	}
	if _, err := rgw.Client().HeadObject(in.ctx, &s3.HeadObjectInput{Bucket: aws.String(buckets["theirs"]), Key: aws.String("intrusion")}); err == nil {
		in.t.Error("the keyless Pod wrote the other bucket")
	}
}

// runClient runs the keyless client as ServiceAccount sa with an access's Secret as
// its environment and its token where the Secret says, waits until it succeeded, and
// returns what it reported (its termination message). It runs as the chart's manager does: non-root, read-only root, no
// capabilities.
func (in *installer) runClient(ns, sa, secret string, args ...string) string {
	in.t.Helper()
	expiry := int64(3600)
	yes, no, user := true, false, int64(65532)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client-" + sa}, Spec: corev1.PodSpec{
		ServiceAccountName: sa, RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: &no,
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &user, FSGroup: &user},
		Containers: []corev1.Container{{
			Name: "client", Image: keylessImage, ImagePullPolicy: corev1.PullNever, Args: args,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			EnvFrom:                  []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secret}}}},
			VolumeMounts:             []corev1.VolumeMount{{Name: "bucket-token", MountPath: bkv1.WebIdentityTokenDir, ReadOnly: true}},
			SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: &yes, AllowPrivilegeEscalation: &no,
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
		}},
		Volumes: []corev1.Volume{{Name: "bucket-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: keylessAudience, ExpirationSeconds: &expiry, Path: "token"}}}}}}},
	}}
	in.create(pod)
	var phase corev1.PodPhase
	message := ""
	in.eventually(3*time.Minute, "Pod "+pod.Name+" to finish", func() error {
		got, err := in.cs.CoreV1().Pods(ns).Get(in.ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if phase = got.Status.Phase; phase != corev1.PodSucceeded && phase != corev1.PodFailed {
			return fmt.Errorf("phase %s", phase)
		}
		for _, cs := range got.Status.ContainerStatuses {
			if cs.State.Terminated != nil {
				message = cs.State.Terminated.Message
			}
		}
		return nil
	})
	in.t.Logf("Pod %s (%s %v): %s", pod.Name, sa, args, strings.TrimSpace(message))
	if phase != corev1.PodSucceeded {
		in.t.Errorf("Pod %s (%s %v) %s: %s", pod.Name, sa, args, phase, message)
	}
	return message
}
