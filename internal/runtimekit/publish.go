package runtimekit

import (
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
// people on this machine; no other run does.

// publisher publishes one server's ports while it runs.
type publisher struct {
	runDir string
	tree   *sandbox.Tree
	warn   func(string)
	mu     sync.Mutex
	open   map[uint16]func()
}

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
	if p == nil {
		return false
	}
	ports, err := p.tree.Listening()
	if err != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, port := range ports {
		if p.open[port] != nil {
			continue
		}
		stop, err := publishPort(p.runDir, p.tree, port)
		if err != nil {
			p.warn(err.Error())
			stop = func() {}
		}
		p.open[port] = stop
	}
	return true
}

func (p *publisher) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, stop := range p.open {
		stop()
	}
	p.open = map[uint16]func(){}
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
