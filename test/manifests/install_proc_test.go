package manifests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// checkProcesses finds each Pod's manager process on this machine (by the container ID
// in its cgroup path) and checks what the kubelet and runc really made of the chart's
// securityContext: user and group 65532, no capabilities, no privilege escalation, the
// runtime's seccomp filter, a read-only root and the ServiceAccount token mounted; and
// that no replica restarted (the liveness probe never failed).
func (in *installer) checkProcesses(pods []corev1.Pod) {
	in.t.Helper()
	for _, p := range pods {
		if len(p.Status.ContainerStatuses) != 1 {
			in.t.Fatalf("Pod %s: %d container statuses", p.Name, len(p.Status.ContainerStatuses))
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount != 0 {
			in.t.Errorf("Pod %s restarted %d times\n%s", p.Name, cs.RestartCount, in.podReport())
		}
		_, id, _ := strings.Cut(cs.ContainerID, "://")
		pid, err := containerProcess(id)
		if err != nil {
			in.t.Errorf("Pod %s: %v", p.Name, err)
			continue
		}
		status := procFields(in, pid, "status")
		for field, want := range map[string]string{
			"Uid":        "65532\t65532\t65532\t65532",
			"Gid":        "65532\t65532\t65532\t65532",
			"CapEff":     "0000000000000000",
			"CapPrm":     "0000000000000000",
			"NoNewPrivs": "1",
			"Seccomp":    "2", // a filter: the runtime's default profile
		} {
			if got := status[field]; got != want {
				in.t.Errorf("Pod %s, the manager (PID %d): %s %q, want %q", p.Name, pid, field, got, want)
			}
		}
		mountinfo, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
		if err != nil {
			in.t.Fatal(err)
		}
		root, token := "", false
		for _, line := range strings.Split(string(mountinfo), "\n") {
			f := strings.Fields(line)
			if len(f) < 6 {
				continue
			}
			switch f[4] {
			case "/":
				root = f[5]
			case "/var/run/secrets/kubernetes.io/serviceaccount":
				token = true
			}
		}
		if !strings.HasPrefix(root, "ro,") && root != "ro" {
			in.t.Errorf("Pod %s: the manager's root is mounted %q, want read-only", p.Name, root)
		}
		if !token {
			in.t.Errorf("Pod %s: no ServiceAccount token mounted for the in-cluster configuration", p.Name)
		}
		in.t.Logf("Pod %s: the manager is PID %d, uid %s, CapEff %s, Seccomp %s, root mounted %s", p.Name, pid,
			status["Uid"], status["CapEff"], status["Seccomp"], root)
	}
}

// containerProcess returns the PID of the process whose cgroup path names the
// container and whose command is the manager.
func containerProcess(id string) (int, error) {
	if id == "" {
		return 0, fmt.Errorf("no container ID")
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		cgroup, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil || !strings.Contains(string(cgroup), id) {
			continue
		}
		if cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); strings.HasPrefix(string(cmdline), "/manager\x00") {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no manager process in container %s", id)
}

// procFields reads /proc/PID/FILE's "Name:\tvalue" lines.
func procFields(in *installer, pid int, file string) map[string]string {
	in.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		in.t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fields
}
