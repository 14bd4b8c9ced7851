package soak

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A soak killed with this process's pid left its network namespace (or,
// killed earlier, the pair's two ends on the machine): a new soak with the
// pid removes them and makes its own. One that still holds a process is
// refused, named, and left as it was.
func TestNetnsOfADeadSoakWithThisPid(t *testing.T) {
	if why := netnsAvailable(); why != "" {
		t.Skip("hosts cannot have network namespaces here: " + why)
	}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ctx := context.Background()
	name, link := netnsNames(os.Getpid(), 0)
	other, otherLink := netnsNames(os.Getpid(), 1)
	t.Cleanup(func() { // what a failed run of this test would leave
		for _, ns := range []string{name, other} {
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
		_ = exec.Command("ip", "link", "del", otherLink).Run()
	})
	ip("netns", "add", name)
	ip("link", "add", otherLink, "type", "veth", "peer", "name", otherLink+"n")
	for i := range 2 {
		n, err := newNetns(ctx, i, nil)
		if err != nil {
			t.Fatalf("host %d over a dead soak's leftovers: %v", i+1, err)
		}
		n.close()
	}
	for _, l := range []string{link, otherLink, otherLink + "n"} {
		if _, err := net.InterfaceByName(l); err == nil {
			t.Errorf("link %s is still here", l)
		}
	}
	for _, ns := range []string{name, other} {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			t.Errorf("namespace %s is still here", ns)
		}
	}

	ip("netns", "add", name)
	held := exec.Command("ip", "netns", "exec", name, "sleep", "60")
	if err := held.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Process.Kill(); _ = held.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if out, _ := exec.Command("ip", "netns", "pids", name).Output(); len(strings.Fields(string(out))) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sleep never showed in the namespace")
		}
	}
	_, err := newNetns(ctx, 0, nil)
	if err == nil || !strings.Contains(err.Error(), "still holds processes") || !strings.Contains(err.Error(), name) {
		t.Fatalf("a namespace something runs in: %v", err)
	}
	if _, err := os.Stat("/run/netns/" + name); err != nil {
		t.Fatalf("the held namespace was removed: %v", err)
	}
}
