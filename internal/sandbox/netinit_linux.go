package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A tree with `network: true` gets no route out of its own network
// namespace: its init (this program, ctlArg) opens a listener on the
// sandbox's loopback and hands it to the worker over the control socket,
// where capflow's egress proxy serves it under the run's rules; the
// tool's HTTP clients find it in HTTP_PROXY and friends. The worker also
// asks the init for connections to the tree's own loopback ports (a
// server's, published on the host by the worker) and gets each back as a
// file descriptor.
//
// The control socket is a SOCK_SEQPACKET pair; messages:
//
//	init -> worker: "L" + the proxy listener's descriptor, once
//	init -> worker: "M" + a port + a listener on that loopback port, once
//	                each: the worker relays its connections to the host's
//	                same port (a port the run was given: Go's clients skip
//	                proxies for loopback)
//	worker -> init: "D" + a port (2 bytes, big endian)
//	init -> worker: "C" + the connection's descriptor, or "E" + why
const ctlArg = "--ctl="

// mirrorArg lists the loopback ports to mirror, comma-separated.
const mirrorArg = "--mirror="

// ctlFD is the control socket's descriptor in the sandbox (bubblewrap's
// ExtraFiles: info, block, control).
const ctlFD = 5

// netInit starts the init's side of the control socket, and returns the
// tool's environment with the proxy's address in it.
func netInit(fd int, env []string, mirror []uint16) ([]string, error) {
	syscall.CloseOnExec(fd)
	ctl, err := net.FileConn(os.NewFile(uintptr(fd), "capflow-ctl"))
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	uc, ok := ctl.(*net.UnixConn)
	if !ok {
		return nil, errors.New("control socket: not a unix socket")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listener: %w", err)
	}
	lf, err := l.(*net.TCPListener).File()
	if err != nil {
		return nil, err
	}
	if _, _, err := uc.WriteMsgUnix([]byte("L"), syscall.UnixRights(int(lf.Fd())), nil); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	addr := l.Addr().String()
	lf.Close()
	l.Close() // the worker holds it now
	for _, port := range mirror {
		if err := handOver(uc, port); err != nil {
			return nil, err
		}
	}
	go serveDials(uc)
	return append(withoutProxy(env), proxyEnv(addr)...), nil
}

// handOver listens on the sandbox's loopback port and hands the listener
// to the worker.
func handOver(uc *net.UnixConn, port uint16) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("mirror of port %d: %w", port, err)
	}
	defer l.Close()
	lf, err := l.(*net.TCPListener).File()
	if err != nil {
		return err
	}
	defer lf.Close()
	msg := []byte{'M', 0, 0}
	binary.BigEndian.PutUint16(msg[1:], port)
	_, _, err = uc.WriteMsgUnix(msg, syscall.UnixRights(int(lf.Fd())), nil)
	return err
}

// parsePorts reads mirrorArg's list.
func parsePorts(s string) []uint16 {
	var out []uint16
	for _, p := range strings.Split(s, ",") {
		if n, err := strconv.ParseUint(p, 10, 16); err == nil && n > 0 {
			out = append(out, uint16(n))
		}
	}
	return out
}

// serveDials answers the worker's requests for connections to this
// sandbox's loopback, until the control socket closes.
func serveDials(uc *net.UnixConn) {
	buf := make([]byte, 16)
	for {
		n, err := uc.Read(buf)
		if err != nil || n == 0 {
			return
		}
		if n != 3 || buf[0] != 'D' {
			continue
		}
		port := strconv.Itoa(int(binary.BigEndian.Uint16(buf[1:3])))
		// Within the worker's wait for the answer (a busy server must not
		// leave a late answer to stand for the next dial's).
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), 2*time.Second)
		if err != nil {
			c, err = net.DialTimeout("tcp", net.JoinHostPort("::1", port), time.Second)
		}
		if err != nil {
			_, _ = uc.Write([]byte("E" + err.Error()))
			continue
		}
		f, err := c.(*net.TCPConn).File()
		c.Close()
		if err != nil {
			_, _ = uc.Write([]byte("E" + err.Error()))
			continue
		}
		_, _, _ = uc.WriteMsgUnix([]byte("C"), syscall.UnixRights(int(f.Fd())), nil)
		f.Close()
	}
}

// proxyEnv points a tool's HTTP clients at the proxy (curl, wget,
// Python, Node's agents; Go's clients for names other than loopback).
func proxyEnv(addr string) []string {
	u := "http://" + addr
	var out []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		out = append(out, k+"="+u, strings.ToLower(k)+"="+u)
	}
	return out
}

// withoutProxy drops the proxy settings the tool was given: the
// sandbox's proxy is the only way out.
func withoutProxy(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY":
			continue
		}
		out = append(out, kv)
	}
	return out
}
