package egress

import (
	"net/netip"
	"slices"
	"sync"
)

// The ports a run's servers were given on this machine's loopback (the
// worker publishes each port a server listens on in its own network
// namespace): that run's steps, browser and probes reach them; nothing
// else of the run reaches loopback.
var published = struct {
	mu sync.Mutex
	m  map[string]map[netip.AddrPort]int
}{m: map[string]map[netip.AddrPort]int{}}

// Publish gives run the address; the func returned takes it back.
func Publish(run string, ap netip.AddrPort) (unpublish func()) {
	published.mu.Lock()
	defer published.mu.Unlock()
	if published.m[run] == nil {
		published.m[run] = map[netip.AddrPort]int{}
	}
	published.m[run][ap]++
	var once sync.Once
	return func() {
		once.Do(func() {
			published.mu.Lock()
			defer published.mu.Unlock()
			if published.m[run][ap]--; published.m[run][ap] <= 0 {
				delete(published.m[run], ap)
			}
			if len(published.m[run]) == 0 {
				delete(published.m, run)
			}
		})
	}
}

// Published are the addresses run was given.
func Published(run string) []netip.AddrPort {
	published.mu.Lock()
	defer published.mu.Unlock()
	var out []netip.AddrPort
	for ap := range published.m[run] {
		out = append(out, ap)
	}
	return out
}

// For is a copy of r (nil: the defaults) that also reaches what run's
// servers were given.
func (r *Rules) For(run string) *Rules {
	out := &Rules{}
	if r != nil {
		*out = *r
	}
	if run != "" {
		out.Given = func() []netip.AddrPort { return Published(run) }
	}
	return out
}

// LoopbackPorts are the ports of this machine's loopback r lets a run
// reach by name: an allow entry's port (127.0.0.1:8080, localhost:8080),
// and what the run's servers were given. A confined tree finds them on
// its own loopback (sandbox.Request.Mirror).
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
	if r.Given != nil {
		for _, g := range r.Given() {
			if g.Addr().IsLoopback() {
				add(g.Port())
			}
		}
	}
	slices.Sort(out)
	return out
}
