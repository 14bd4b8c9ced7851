package soak

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
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
	name, link, err := addNetns(ctx, i)
	if err != nil {
		return nil, err
	}
	n := &netns{name: name, link: link, ownNS: true,
		hostIP: fmt.Sprintf("10.231.%d.1", subnet), nsIP: fmt.Sprintf("10.231.%d.2", subnet), conns: map[net.Conn]bool{}}
	steps := [][]string{
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
		// What the soak made is what it removes: a name another soak
		// took (a failed add) stays its.
		n.ownLink = k >= 0
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

// netnsNames are host i's namespace and link names under tag (a link
// name has at most 15 bytes: "cfs", the tag's six, "-", the host, "n").
func netnsNames(tag string, i int) (name, link string) {
	return fmt.Sprintf("capflow-soak-%s-%d", tag, i+1), fmt.Sprintf("cfs%s-%d", tag, i+1)
}

// netnsTag is a random tag for a host's names: no live soak's, wherever
// it runs (a pid is not: soaks in two containers on one network may share
// theirs), and none a killed soak left. (A variable for tests.)
var netnsTag = func() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// addNetns makes host i's namespace under a tag no one holds: a name
// taken (what a killed soak left, or another soak's) is passed over, never
// removed: that is not this soak's to judge.
func addNetns(ctx context.Context, i int) (name, link string, err error) {
	for range 5 {
		name, link = netnsNames(netnsTag(), i)
		out, err := exec.CommandContext(ctx, "ip", "netns", "add", name).CombinedOutput()
		if err == nil {
			return name, link, nil
		}
		if !strings.Contains(string(out), "File exists") {
			return "", "", fmt.Errorf("ip netns add %s: %v: %s", name, err, strings.TrimSpace(string(out)))
		}
	}
	return "", "", fmt.Errorf("ip netns add: five random names were all taken (ip netns list: what soaks left)")
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
