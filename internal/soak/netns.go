package soak

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// netns is a host's own network namespace, joined to the machine's by a
// veth pair: the host has its own loopback (a server a run starts on port
// N is that host's alone) and reaches the cluster only through the soak's
// forwarders on the machine's end of the pair (the cluster listens on
// loopback). Made with ip(8); root only.
type netns struct {
	name, link   string
	hostIP, nsIP string
	listeners    []net.Listener
	mu           sync.Mutex
	conns        map[net.Conn]bool
	closed       bool
	// ownNS, ownLink: made by this soak (removed by close).
	ownNS, ownLink bool
}

// netnsAvailable says why hosts cannot have network namespaces here ("" if
// they can).
func netnsAvailable() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "no ip(8)"
	}
	return ""
}

// loopbackAddrs are the 127.0.0.1:PORT addresses in ss (the cluster's
// frontend, the store's endpoint): what a host in a namespace reaches
// through the soak's forwarders.
func loopbackAddrs(ss ...string) []string {
	var out []string
	for _, s := range ss {
		for _, a := range loopbackRE.FindAllString(s, -1) {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

var loopbackRE = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)

// newNetns makes host i's namespace and forwards each of targets
// (127.0.0.1:PORT) from the machine's end of the pair, same port.
func newNetns(ctx context.Context, i int, targets []string) (*netns, error) {
	// A subnet of this soak's own: two soaks on a machine rarely share one
	// (1 in 60).
	pid := os.Getpid()
	subnet := (pid%60)*4 + i + 1
	name, link := netnsNames(pid, i)
	if err := clearLeftover(ctx, name, link); err != nil {
		return nil, err
	}
	n := &netns{name: name, link: link,
		hostIP: fmt.Sprintf("10.231.%d.1", subnet), nsIP: fmt.Sprintf("10.231.%d.2", subnet), conns: map[net.Conn]bool{}}
	steps := [][]string{
		{"netns", "add", n.name},
		{"link", "add", n.link, "type", "veth", "peer", "name", n.link + "n"},
		{"link", "set", n.link + "n", "netns", n.name},
		{"addr", "add", n.hostIP + "/30", "dev", n.link},
		{"link", "set", n.link, "up"},
		{"-n", n.name, "addr", "add", n.nsIP + "/30", "dev", n.link + "n"},
		{"-n", n.name, "link", "set", n.link + "n", "up"},
		{"-n", n.name, "link", "set", "lo", "up"},
	}
	for k, args := range steps {
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			n.close()
			return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		// What the soak made is what it removes: names another soak took
		// (a failed add) stay its.
		n.ownNS, n.ownLink = k >= 0, k >= 1
	}
	for _, t := range targets {
		_, port, err := net.SplitHostPort(t)
		if err != nil {
			n.close()
			return nil, err
		}
		l, err := net.Listen("tcp", net.JoinHostPort(n.hostIP, port))
		if err != nil {
			n.close()
			return nil, err
		}
		n.listeners = append(n.listeners, l)
		go n.forward(l, t)
	}
	return n, nil
}

// netnsNames are host i's namespace and link names in the soak with this
// pid, whole (a link name has at most 15 bytes: "cfs", six hex digits for
// the largest pid_max, the host, "n"), so no two live soaks share one.
func netnsNames(pid, i int) (name, link string) {
	return fmt.Sprintf("capflow-soak-%x-%d", pid, i+1), fmt.Sprintf("cfs%x%d", pid, i+1)
}

// clearLeftover removes the namespace and link a killed soak left under
// the names this one takes: it had this pid, so it has ended (the pid was
// free to reuse). A namespace something still runs in is refused, named
// with what is in it: that is the dead soak's, for its owner to stop.
func clearLeftover(ctx context.Context, name, link string) error {
	if _, err := os.Stat(filepath.Join("/run/netns", name)); err == nil {
		out, err := exec.CommandContext(ctx, "ip", "netns", "pids", name).Output()
		if pids := strings.Fields(string(out)); err != nil || len(pids) > 0 {
			return fmt.Errorf("network namespace %s is left from a soak that ended and still holds processes %v (%v): stop them, then `ip netns del %s`", name, pids, err, name)
		}
		if out, err := exec.CommandContext(ctx, "ip", "netns", "del", name).CombinedOutput(); err != nil {
			return fmt.Errorf("ip netns del %s (left from a soak that ended): %v: %s", name, err, strings.TrimSpace(string(out)))
		}
	}
	// Deleting the namespace took the pair with it; a soak killed before it
	// moved the pair's end in left both ends here.
	if _, err := net.InterfaceByName(link); err == nil {
		if out, err := exec.CommandContext(ctx, "ip", "link", "del", link).CombinedOutput(); err != nil {
			return fmt.Errorf("ip link del %s (left from a soak that ended): %v: %s", link, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// forward copies each connection to target and back.
func (n *netns) forward(l net.Listener, target string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				return
			}
			n.track(c, true)
			n.track(up, true)
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
			<-done
			c.Close()
			up.Close()
			n.track(c, false)
			n.track(up, false)
		}()
	}
}

func (n *netns) track(c net.Conn, open bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case open && n.closed:
		c.Close() // accepted as the soak ended
	case open:
		n.conns[c] = true
	default:
		delete(n.conns, c)
	}
}

// rewrite gives an address or URL as the host sees it: the cluster's
// loopback addresses are the forwarders' on the machine's end.
func (n *netns) rewrite(s string) string {
	return strings.ReplaceAll(s, "127.0.0.1:", n.hostIP+":")
}

// command runs argv inside the namespace (ip netns exec execs it: the
// pid is the program's own).
func (n *netns) command(argv ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.name}, argv...)...)
}

func (n *netns) close() {
	for _, l := range n.listeners {
		l.Close()
	}
	n.mu.Lock()
	n.closed = true
	for c := range n.conns {
		c.Close()
	}
	n.mu.Unlock()
	if n.ownLink {
		_ = exec.Command("ip", "link", "del", n.link).Run()
	}
	if n.ownNS {
		_ = exec.Command("ip", "netns", "del", n.name).Run()
	}
}
