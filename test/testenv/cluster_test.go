package testenv_test

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestClusterRunsAPodAndLeavesNothing starts the single-node cluster, runs a Pod from
// the pause image (the one image the harness imports itself), then stops the cluster
// and checks that nothing is left: no process of the node's PID namespace, no cgroup,
// no directory.
func TestClusterRunsAPodAndLeavesNothing(t *testing.T) {
	c, err := testenv.StartCluster()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	dir, initPID, cgroups := c.Dir(), c.NodeInitPID(), c.NodeCgroups()
	if initPID == 0 || len(cgroups) == 0 {
		t.Fatalf("node init PID %d, cgroups %v", initPID, cgroups)
	}
	cs := kubernetes.NewForConfigOrDie(c.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pause", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "pause", Image: testenv.PauseImage, ImagePullPolicy: corev1.PullNever,
		}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	var getErr error
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		last, getErr = cs.CoreV1().Pods("default").Get(ctx, "pause", metav1.GetOptions{})
		return getErr == nil && last.Status.Phase == corev1.PodRunning && last.Status.PodIP != "", nil
	}); err != nil {
		t.Fatalf("Pod not Running with an IP: %v (last: %v, %+v)\n%s", err, getErr, last, c.Logs())
	}
	t.Logf("Pod running at %s", last.Status.PodIP)

	if err := c.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if !testenv.ProcessExited(initPID) {
		t.Errorf("the node's init (PID %d) outlived Stop", initPID)
	}
	for _, d := range append(cgroups, dir) {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left after Stop (%v)", d, err)
		}
	}
}
