package runtimekit

import (
	"net"
	"net/netip"
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

// publish watches tree's listening ports until the tree ends.
func publish(runDir string, tree *sandbox.Tree, warn func(string)) {
	ended := tree.Ended()
	if ended == nil {
		return
	}
	go func() {
		open := map[uint16]func(){}
		defer func() {
			for _, stop := range open {
				stop()
			}
		}()
		began := time.Now()
		for {
			ports, err := tree.Listening()
			if err != nil {
				return // the tree is gone
			}
			for _, p := range ports {
				if open[p] != nil {
					continue
				}
				stop, err := publishPort(runDir, tree, p)
				if err != nil {
					warn(err.Error())
					stop = func() {}
				}
				open[p] = stop
			}
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
