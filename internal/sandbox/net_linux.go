package sandbox

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capflow/capflow/internal/egress"
	"golang.org/x/net/netutil"
)

// treeNet is the worker's side of a tree's control socket
// (netinit_linux.go): the proxy it serves, the connections it asks for.
type treeNet struct {
	ctl      *net.UnixConn
	child    *os.File // the sandbox's end, closed once bubblewrap has it
	outbound http.Handler
	relay    func(port uint16) (net.Conn, error)
	mirrorMu sync.Mutex // guards what follows
	mirrors  []net.Listener
	server   *http.Server
	own      []uint16   // the ports the init listens on: never a server's
	asked    bool       // a dial waits for its answer
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
// tree ended), serving the listeners it hands over. The init speaks
// first, once: its proxy listener (L), then one listener a mirrored port
// (M); after that only answers to the worker's dials (C, E), one for each
// asked. Anything else is a tree that took the init's socket: its way to
// the network ends there.
func (n *treeNet) run(mirrors int) {
	n.child.Close()
	defer n.close()
	buf, oob := make([]byte, 512), make([]byte, syscall.CmsgSpace(4))
	for {
		k, oobn, _, _, err := n.ctl.ReadMsgUnix(buf, oob)
		if err != nil || k == 0 {
			return
		}
		f := receivedFile(oob[:oobn])
		if !n.handle(buf[:k], f, &mirrors) {
			if f != nil {
				f.Close()
			}
			return
		}
	}
}

// handle takes one message of the init's (f: the descriptor it carried,
// closed here once used); false ends the tree's network.
func (n *treeNet) handle(msg []byte, f *os.File, mirrors *int) bool {
	n.mirrorMu.Lock()
	defer n.mirrorMu.Unlock()
	switch {
	case msg[0] == 'L' && n.listener == nil && f != nil:
		l, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return false
		}
		n.listener, n.own = l, append(n.own, portOf(l))
		n.server = &http.Server{Handler: n.outbound, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: time.Minute}
		// At most maxConns at once: a tree that opens thousands waits in
		// its own backlog, holding none of the worker's descriptors.
		go func() { _ = n.server.Serve(netutil.LimitListener(l, maxConns)) }()
	case msg[0] == 'M' && n.listener != nil && *mirrors > 0 && len(msg) == 3 && f != nil:
		l, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return false
		}
		*mirrors--
		port := binary.BigEndian.Uint16(msg[1:3])
		n.mirrors, n.own = append(n.mirrors, l), append(n.own, port)
		go n.mirror(netutil.LimitListener(l, maxConns), port)
	case (msg[0] == 'C' || msg[0] == 'E') && n.asked:
		n.asked = false
		r := reply{err: errors.New(string(msg[1:]))}
		if msg[0] == 'C' {
			r.err = errors.New("no connection passed")
			if f != nil {
				r.conn, r.err = net.FileConn(f)
				f.Close()
			}
		}
		n.replies <- r // buffered: one answer to the one dial asked
	default:
		return false
	}
	return true
}

// maxConns bounds the connections a tree has through the worker at once,
// on its proxy and on each mirrored port.
const maxConns = 256

// portOf is a TCP listener's port.
func portOf(l net.Listener) uint16 {
	if a, ok := l.Addr().(*net.TCPAddr); ok {
		return uint16(a.Port)
	}
	return 0
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
		if n.server != nil {
			_ = n.server.Close() // its listener and idle connections
		}
		if c, ok := n.outbound.(io.Closer); ok {
			_ = c.Close() // the proxy's tunnels
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
	n.mirrorMu.Lock()
	n.asked = true
	n.mirrorMu.Unlock()
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
// namespace, on its loopback or every address: not those of its init (its
// proxy, its mirrors).
func (t *Tree) Listening() ([]uint16, error) {
	if t.init <= 0 {
		return nil, errors.New("the tree has not started")
	}
	var out []uint16
	seen := map[uint16]bool{}
	if t.net != nil {
		t.net.mirrorMu.Lock()
		for _, p := range t.net.own {
			seen[p] = true
		}
		t.net.mirrorMu.Unlock()
	}
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
