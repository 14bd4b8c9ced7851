package egress

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// A run's servers listen in network namespaces of their own: nothing of
// them is on this machine's loopback. What the run connects to on
// loopback at a port one of its servers listens on is routed to that
// server instead (Publish): its probes, its browser and its steps reach
// it, by 127.0.0.1:PORT or localhost:PORT, as the plan says; no other
// run does, and no port of the host is taken.
var routes = struct {
	mu sync.Mutex
	m  map[string]map[uint16]Route
}{m: map[string]map[uint16]Route{}}

// Route connects to a server of the run, inside its network namespace.
type Route func() (net.Conn, error)

// Publish routes run's connections to loopback port to dial; the func
// returned takes the route back.
func Publish(run string, port uint16, dial Route) (unpublish func()) {
	routes.mu.Lock()
	defer routes.mu.Unlock()
	if routes.m[run] == nil {
		routes.m[run] = map[uint16]Route{}
	}
	routes.m[run][port] = dial
	var once sync.Once
	return func() {
		once.Do(func() {
			routes.mu.Lock()
			defer routes.mu.Unlock()
			delete(routes.m[run], port)
			if len(routes.m[run]) == 0 {
				delete(routes.m, run)
			}
		})
	}
}

// Published are the loopback ports routed to run's servers.
func Published(run string) []uint16 {
	routes.mu.Lock()
	defer routes.mu.Unlock()
	var out []uint16
	for p := range routes.m[run] {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func routeOf(run string, port uint16) Route {
	routes.mu.Lock()
	defer routes.mu.Unlock()
	return routes.m[run][port]
}

// For is a copy of r (nil: the defaults) whose connections to loopback
// reach what run's servers listen on.
func (r *Rules) For(run string) *Rules {
	out := &Rules{}
	if r != nil {
		*out = *r
	}
	if run != "" {
		out.run = run
	}
	return out
}

// route is the route of a connection to host:port, if it goes to a
// server of the rules' run: host a loopback address or localhost.
func (r *Rules) route(host string, port uint16) Route {
	if r.run == "" {
		return nil
	}
	if !strings.EqualFold(host, "localhost") {
		a, err := netip.ParseAddr(strings.Trim(host, "[]"))
		if err != nil || !a.Unmap().IsLoopback() {
			return nil
		}
	}
	return routeOf(r.run, port)
}

// LoopbackPorts are the ports of this machine's loopback r lets a run
// reach by name: an allow entry's port (127.0.0.1:8080, localhost:8080),
// and its servers' ports. A confined tree finds them on its own loopback
// (sandbox.Request.Mirror).
func (r *Rules) LoopbackPorts() []uint16 {
	lo := netip.MustParseAddr("127.0.0.1")
	seen := map[uint16]bool{}
	var out []uint16
	add := func(p uint16) {
		if p != 0 && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, e := range r.Allow {
		if e.Port != 0 && (e.Host == "localhost" || e.Host == "" && e.Prefix.Contains(lo)) {
			add(e.Port)
		}
	}
	if r.run != "" {
		for _, p := range Published(r.run) {
			add(p)
		}
	}
	slices.Sort(out)
	return out
}
