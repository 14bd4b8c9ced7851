package soak

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A host's names are taken (what a killed soak left, or another soak's):
// the soak takes others and leaves the holder's as they were.
func TestNetnsPassesOverTakenNames(t *testing.T) {
	if why := netnsAvailable(); why != "" {
		t.Skip("hosts cannot have network namespaces here: " + why)
	}
	taken, _ := netnsNames("0ccu9d", 0)
	if out, err := exec.Command("ip", "netns", "add", taken).CombinedOutput(); err != nil {
		if strings.Contains(string(out), "not permitted") {
			t.Skip("root, but no namespaces here (no CAP_SYS_ADMIN): " + strings.TrimSpace(string(out)))
		}
		t.Fatalf("ip netns add %s: %v: %s", taken, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", taken).Run() })
	tags := []string{"0ccu9d", "0ccu9e"}
	defer func(f func() string) { netnsTag = f }(netnsTag)
	netnsTag = func() string { tag := tags[0]; tags = tags[1:]; return tag }

	n, err := newNetns(context.Background(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	ours, link := netnsNames("0ccu9e", 0)
	if n.name != ours || n.link != link {
		t.Fatalf("names %s %s, want %s %s", n.name, n.link, ours, link)
	}
	if _, err := net.InterfaceByName(link); err != nil {
		t.Fatalf("its link: %v", err)
	}
	n.close()
	if _, err := os.Stat("/run/netns/" + taken); err != nil {
		t.Fatalf("the holder's namespace went: %v", err)
	}
	if _, err := os.Stat("/run/netns/" + ours); err == nil {
		t.Errorf("namespace %s outlived its soak", ours)
	}
	if _, err := net.InterfaceByName(link); err == nil {
		t.Errorf("link %s outlived its soak", link)
	}
}
