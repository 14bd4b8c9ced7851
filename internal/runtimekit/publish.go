package runtimekit

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/internal/sandbox"
)

// A confined server has a network namespace of its own: nothing it
// listens on is reachable from the host. The worker that started it
// publishes each port it listens on (on its loopback or every address) on
// this machine's loopback, and gives that address to the server's run
// (egress.Publish): the run's probes, browser and steps reach it, as do
// people on this machine and tools that run unconfined; another run's
// confined steps reach it only where their policy allows the address.

// publisher publishes one server's ports while it runs.
type publisher struct {
	runDir string
	tree   *sandbox.Tree
	rules  *egress.Rules
	warn   func(string)
	mu     sync.Mutex
	open   map[uint16]func() // nil once closed
}

// maxPublished bounds the ports one server is given on the host.
const maxPublished = 16

// publish watches tree's listening ports until the tree ends (nil: a
// tree without a network namespace of its own).
func publish(runDir string, tree *sandbox.Tree, rules *egress.Rules, warn func(string)) *publisher {
	ended := tree.Ended()
	if ended == nil {
		return nil
	}
	p := &publisher{runDir: runDir, tree: tree, rules: rules, warn: warn, open: map[uint16]func(){}}
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
	if p == nil {
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
		stop := func() {}
		why := p.refused(port)
		if why == "" {
			var err error
			if stop, err = publishPort(p.runDir, p.tree, port); err != nil {
				why, stop = err.Error(), func() {}
			}
		}
		if why != "" {
			p.warn(fmt.Sprintf("port %d is not published: %s", port, why))
		}
		p.open[port] = stop
	}
	return true
}

// refused says why a port the server listens on is not given the same
// port of the host's loopback ("" when it is): a privileged port, a port
// of the worker's own services (a server must not stand in for Temporal
// while it restarts), past maxPublished.
func (p *publisher) refused(port uint16) string {
	switch {
	case port < 1024:
		return "a privileged port (below 1024)"
	case len(p.open) >= maxPublished:
		return fmt.Sprintf("a server is given at most %d ports", maxPublished)
	}
	for _, s := range p.rules.Services {
		if s.Port == port {
			return "the port of " + s.Name
		}
	}
	return ""
}

func (p *publisher) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, stop := range p.open {
		stop()
	}
	p.open = nil
}

// publishPort relays 127.0.0.1:port on the host to the tree's port.
func publishPort(runDir string, tree *sandbox.Tree, port uint16) (func(), error) {
	ap := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
	l, err := net.Listen("tcp", ap.String())
	if err != nil {
		return nil, err
	}
	unpublish := egress.Publish(runDir, ap)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				inner, err := tree.DialInside(port)
				if err != nil {
					c.Close()
					return
				}
				egress.Splice(c, inner)
			}()
		}
	}()
	return func() { unpublish(); l.Close() }, nil
}
