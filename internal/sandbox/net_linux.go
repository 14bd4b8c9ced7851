package sandbox

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capflow/capflow/internal/egress"
)

// treeNet is the worker's side of a tree's control socket
// (netinit_linux.go): the proxy it serves, the connections it asks for.
type treeNet struct {
	ctl      *net.UnixConn
	child    *os.File // the sandbox's end, closed once bubblewrap has it
	outbound http.Handler
	relay    func(port uint16) (net.Conn, error)
	mirrorMu sync.Mutex
	mirrors  []net.Listener
	mu       sync.Mutex // one dial at a time: replies come in order
	replies  chan reply
	closed   chan struct{}
	once     sync.Once
	listener net.Listener
}

type reply struct {
	conn net.Conn
	err  error
}

// newTreeNet makes the control socket of a tree with the network.
func newTreeNet(outbound http.Handler, relay func(uint16) (net.Conn, error)) (*treeNet, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	f := os.NewFile(uintptr(fds[0]), "capflow-ctl")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		syscall.Close(fds[1])
		return nil, err
	}
	if outbound == nil {
		outbound = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "capflow: this tool reaches no network", http.StatusForbidden)
		})
	}
	return &treeNet{ctl: c.(*net.UnixConn), child: os.NewFile(uintptr(fds[1]), "capflow-ctl-child"),
		outbound: outbound, relay: relay, replies: make(chan reply, 1), closed: make(chan struct{})}, nil
}

// run reads the init's messages until the control socket closes (the
// tree ended), serving the proxy listener it hands over.
func (n *treeNet) run() {
	n.child.Close()
	defer n.close()
	buf, oob := make([]byte, 512), make([]byte, syscall.CmsgSpace(4))
	for {
		k, oobn, _, _, err := n.ctl.ReadMsgUnix(buf, oob)
		if err != nil || k == 0 {
			return
		}
		f := receivedFile(oob[:oobn])
		switch buf[0] {
		case 'L':
			if f == nil {
				return
			}
			l, err := net.FileListener(f)
			f.Close()
			if err != nil {
				return
			}
			n.mirrorMu.Lock()
			n.listener = l
			n.mirrorMu.Unlock()
			srv := &http.Server{Handler: n.outbound, ReadHeaderTimeout: 30 * time.Second}
			go func() { _ = srv.Serve(l) }()
		case 'M':
			if f == nil || k < 3 {
				continue
			}
			l, err := net.FileListener(f)
			f.Close()
			if err == nil {
				n.mirrorMu.Lock()
				n.mirrors = append(n.mirrors, l)
				n.mirrorMu.Unlock()
				go n.mirror(l, binary.BigEndian.Uint16(buf[1:3]))
			}
		case 'C':
			r := reply{err: errors.New("no connection passed")}
			if f != nil {
				r.conn, r.err = net.FileConn(f)
				f.Close()
			}
			n.replies <- r
		case 'E':
			n.replies <- reply{err: errors.New(string(buf[1:k]))}
		}
	}
}

func receivedFile(oob []byte) *os.File {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) == 0 {
		return nil
	}
	fds, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) == 0 {
		return nil
	}
	for _, fd := range fds[1:] {
		syscall.Close(fd)
	}
	return os.NewFile(uintptr(fds[0]), "capflow-passed")
}

// mirror relays the connections to a loopback port of the sandbox to the
// same port of the host's, as the tree's rules allow.
func (n *treeNet) mirror(l net.Listener, port uint16) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			if n.relay == nil {
				c.Close()
				return
			}
			up, err := n.relay(port)
			if err != nil {
				c.Close()
				return
			}
			egress.Splice(c, up)
		}()
	}
}

func (n *treeNet) close() {
	n.once.Do(func() {
		close(n.closed)
		n.ctl.Close()
		n.mirrorMu.Lock()
		if n.listener != nil {
			n.listener.Close()
		}
		for _, l := range n.mirrors {
			l.Close()
		}
		n.mirrorMu.Unlock()
	})
}

// DialInside connects to port on the tree's own loopback (a server's
// port), through its init.
func (t *Tree) DialInside(port uint16) (net.Conn, error) {
	n := t.net
	if n == nil {
		return nil, errors.New("the tree has no control socket")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	msg := []byte{'D', 0, 0}
	binary.BigEndian.PutUint16(msg[1:], port)
	if _, err := n.ctl.Write(msg); err != nil {
		return nil, err
	}
	select {
	case r := <-n.replies:
		return r.conn, r.err
	case <-n.closed:
		return nil, errors.New("the sandbox has ended")
	case <-time.After(5 * time.Second):
		n.close() // a reply that comes later would answer the next dial
		return nil, errors.New("the sandbox's init did not answer")
	}
}

// Ended is closed when the tree's init is gone (its control socket
// closed); nil for a tree without one.
func (t *Tree) Ended() <-chan struct{} {
	if t.net == nil {
		return nil
	}
	return t.net.closed
}

// Listening are the TCP ports the tree listens on in its own network
// namespace, on its loopback or every address.
func (t *Tree) Listening() ([]uint16, error) {
	if t.init <= 0 {
		return nil, errors.New("the tree has not started")
	}
	var out []uint16
	seen := map[uint16]bool{}
	for _, f := range []string{"tcp", "tcp6"} {
		ports, err := listeningIn(fmt.Sprintf("/proc/%d/net/%s", t.init, f))
		if err != nil && f == "tcp" {
			return nil, err
		}
		for _, p := range ports {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// listeningIn reads a /proc/net/tcp table: the ports in state LISTEN (0A)
// on a loopback or the unspecified address.
func listeningIn(file string) ([]uint16, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []uint16
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[3] != "0A" {
			continue
		}
		addr, port, ok := strings.Cut(fields[1], ":")
		if !ok || !localHex(addr) {
			continue
		}
		if p, err := strconv.ParseUint(port, 16, 16); err == nil {
			out = append(out, uint16(p))
		}
	}
	return out, sc.Err()
}

// localHex: a /proc/net address (hex, host byte order per 32-bit word) of
// 127.x.x.x, ::1, 0.0.0.0 or ::, or ::ffff:127.x.x.x.
func localHex(h string) bool {
	switch {
	case len(h) == 8:
		return strings.HasSuffix(h, "7F") || h == "00000000"
	case len(h) == 32:
		return h == strings.Repeat("0", 32) || h == "00000000000000000000000001000000" ||
			strings.HasPrefix(h, "0000000000000000FFFF0000") && strings.HasSuffix(h, "7F")
	}
	return false
}
