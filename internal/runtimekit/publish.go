package runtimekit

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/internal/sandbox"
)

// A confined server has a network namespace of its own: nothing it
// listens on is on this machine's loopback. The worker that started it
// routes its run's connections to loopback at each port it listens on (on
// its loopback or every address) into its namespace (egress.Publish): the
// run's probes, browser and steps reach it as 127.0.0.1:PORT or
// localhost:PORT; no other run does, and no port of the host is taken.

// publisher publishes one server's ports while it runs.
type publisher struct {
	runDir string
	tree   *sandbox.Tree
	warn   func(string)
	mu     sync.Mutex
	open   map[uint16]func() // nil once closed
}

// maxPublished bounds the ports of one server its run is routed to.
const maxPublished = 16

// publish watches tree's listening ports until the tree ends (nil: a
// tree without a network namespace of its own).
func publish(runDir string, tree *sandbox.Tree, warn func(string)) *publisher {
	ended := tree.Ended()
	if ended == nil {
		return nil
	}
	p := &publisher{runDir: runDir, tree: tree, warn: warn, open: map[uint16]func(){}}
	go func() {
		defer p.close()
		began := time.Now()
		for p.scan() {
			every := 100 * time.Millisecond
			if time.Since(began) > 10*time.Second {
				every = time.Second
			}
			select {
			case <-ended:
				return
			case <-time.After(every):
			}
		}
	}()
	return p
}

// scan publishes the ports the tree listens on now; false once the tree
// is gone. The server's start calls it too once the server is ready, so
// the step after it finds every port it listened on by then.
func (p *publisher) scan() bool {
	if p == nil || p.tree == nil {
		return false
	}
	ports, err := p.tree.Listening()
	if err != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open == nil {
		return false // closed: the server ended
	}
	for _, port := range ports {
		if p.open[port] != nil {
			continue
		}
		if len(p.open) >= maxPublished {
			p.warn(fmt.Sprintf("port %d is not routed to: a server is given at most %d ports", port, maxPublished))
			p.open[port] = func() {}
			continue
		}
		p.open[port] = egress.Publish(p.runDir, port, func() (net.Conn, error) { return p.tree.DialInside(port) })
	}
	return true
}

// hostRoutes routes a run's connections to the loopback ports of an
// unconfined server (it listens on the host's: the ports its plan names)
// to the host's, until close.
func hostRoutes(runDir string, ports []uint16) *publisher {
	p := &publisher{open: map[uint16]func(){}}
	for _, port := range ports {
		p.open[port] = egress.Publish(runDir, port, func() (net.Conn, error) {
			return net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), 5*time.Second)
		})
	}
	return p
}

func (p *publisher) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, stop := range p.open {
		stop()
	}
	p.open = nil
}
