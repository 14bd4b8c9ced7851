// Package egress decides which network addresses a run may reach
// (docs/security.md): no loopback, private, link-local or metadata
// address, none of this machine's own and none of the worker's services,
// unless the policy's `network: {allow: [...]}` names it. The decision is
// made on the address a connection is about to use, after DNS and for
// every redirect (a dialer's Control hook); a host name matters only where
// an allow entry or a service is a name, and even then a name never opens
// a metadata address or a service's port.
package egress

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Entry is one `network.allow` entry: an address, a range or a host name
// ("*.example.com" for its subdomains), with or without a port.
type Entry struct {
	Text   string
	Host   string       // a host name, lower case ("" for an address or range)
	Prefix netip.Prefix // an address (a /32 or /128) or a range
	Port   uint16       // 0: any port
}

// ParseEntry reads one allow entry: "10.0.0.0/8", "127.0.0.1:8080",
// "[::1]:9000", "db.internal", "*.corp.example:443".
func ParseEntry(s string) (Entry, error) {
	e := Entry{Text: s}
	t := strings.TrimSpace(s)
	if t == "" {
		return e, fmt.Errorf("empty entry")
	}
	if strings.Contains(t, "://") {
		return e, fmt.Errorf("%q: write the host or address (and :port), not a URL", s)
	}
	if p, err := netip.ParsePrefix(t); err == nil {
		e.Prefix = p.Masked()
		return e, nil
	}
	if a, err := netip.ParseAddr(t); err == nil {
		e.Prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		return e, nil
	}
	host := t
	if h, port, err := net.SplitHostPort(t); err == nil {
		n, perr := strconv.ParseUint(port, 10, 16)
		if perr != nil || n == 0 {
			return e, fmt.Errorf("%q: the port must be 1-65535", port)
		}
		e.Port, host = uint16(n), h
	}
	if a, err := netip.ParseAddr(host); err == nil {
		e.Prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		return e, nil
	}
	if p, err := netip.ParsePrefix(host); err == nil {
		e.Prefix = p.Masked()
		return e, nil
	}
	if !validHost(strings.TrimPrefix(host, "*.")) {
		return e, fmt.Errorf("%q is neither an address, a range (10.0.0.0/8) nor a host name", s)
	}
	e.Host = strings.ToLower(strings.TrimSuffix(host, "."))
	return e, nil
}

// validHost: letters, digits, '-' and '.', each label 1-63 characters.
func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return false
			}
		}
	}
	return true
}

// matches: the entry covers a connection to addr, asked for by host.
func (e Entry) matches(host string, addr netip.AddrPort) bool {
	if e.Port != 0 && e.Port != addr.Port() {
		return false
	}
	if e.Host != "" {
		h := strings.ToLower(strings.TrimSuffix(host, "."))
		if suffix, ok := strings.CutPrefix(e.Host, "*."); ok {
			return strings.HasSuffix(h, "."+suffix)
		}
		return h == e.Host
	}
	return e.Prefix.Contains(addr.Addr().Unmap())
}

// Service is one of the worker's own services, which a run reaches only
// where an allow entry names it.
type Service struct {
	Name string // "Temporal's frontend", "the console"
	Host string // as configured, lower case
	// Addrs are what Host resolved to when the rules were made; Port 0
	// is every port of the host.
	Addrs []netip.Addr
	Port  uint16
	// live: the machine's own addresses, as they are (ThisMachine).
	live bool
}

// ServiceAt describes a service listening at hostport ("host:port", or a
// host alone for all its ports). Host names are resolved once, here.
func ServiceAt(name, hostport string) (Service, bool) {
	hostport = strings.TrimSpace(hostport)
	if hostport == "" {
		return Service{}, false
	}
	host, port := hostport, uint16(0)
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host = h
		if n, err := strconv.ParseUint(p, 10, 16); err == nil {
			port = uint16(n)
		}
	}
	s := Service{Name: name, Host: strings.ToLower(host), Port: port}
	if host == "" { // ":8080" listens on every address
		host = "0.0.0.0"
	}
	if a, err := netip.ParseAddr(host); err == nil {
		s.Addrs = []netip.Addr{a.Unmap()}
	} else if ips, err := net.LookupIP(host); err == nil {
		for _, ip := range ips {
			if a, ok := netip.AddrFromSlice(ip); ok {
				s.Addrs = append(s.Addrs, a.Unmap())
			}
		}
	}
	return s, true
}

// ThisMachine is the machine's own addresses (every interface's, as they
// are now) as a service: a service bound to every address (0.0.0.0, ::)
// is reached on any of them, and a run reaches none unless an allow entry
// names it.
func ThisMachine() Service { return Service{Name: "this machine", live: true} }

// machine keeps the machine's addresses, read again at most once a second:
// an address it gains (DHCP, a VPN) is its own at once.
var machine struct {
	mu    sync.Mutex
	at    time.Time
	addrs []netip.Addr
}

func machineAddrs() []netip.Addr {
	machine.mu.Lock()
	defer machine.mu.Unlock()
	if time.Since(machine.at) > time.Second {
		machine.addrs, machine.at = nil, time.Now()
		addrs, _ := net.InterfaceAddrs()
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				machine.addrs = append(machine.addrs, p.Addr().Unmap())
			}
		}
	}
	return machine.addrs
}

func (s Service) matches(host string, addr netip.AddrPort) bool {
	if s.Port != 0 && s.Port != addr.Port() {
		return false
	}
	if s.Host != "" && strings.EqualFold(strings.TrimSuffix(host, "."), s.Host) {
		return true
	}
	a := addr.Addr().Unmap()
	addrs := s.Addrs
	if s.live {
		addrs = machineAddrs()
	}
	for _, x := range addrs {
		// A service on every address (0.0.0.0, ::) is reached on any of
		// the machine's: all of them are its.
		if x == a || x.IsUnspecified() && Special(a) != "" {
			return true
		}
	}
	return false
}

// Rules are what one run may reach.
type Rules struct {
	Allow    []Entry
	Services []Service
	// run is the run whose servers' ports a connection to loopback is
	// routed to (For).
	run string
}

// Refused is a connection the rules do not allow.
type Refused struct {
	Host string
	Addr netip.AddrPort
	Why  string
}

func (r *Refused) Error() string {
	what := r.Addr.String()
	if r.Host != "" && r.Host != r.Addr.Addr().String() {
		what = fmt.Sprintf("%s (%s)", net.JoinHostPort(r.Host, strconv.Itoa(int(r.Addr.Port()))), r.Addr)
	}
	return fmt.Sprintf("%s is %s: a run reaches it only where policy.yaml's network.allow names it", what, r.Why)
}

// Check decides one connection to addr, asked for by host (the name in
// the URL, or the address itself): nil, or a *Refused.
func (r *Rules) Check(host string, addr netip.AddrPort) error {
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	for _, e := range r.Allow {
		if !e.matches(host, addr) {
			continue
		}
		if e.Host != "" {
			// A name may resolve anywhere (or rebind): it never opens a
			// metadata address or a service's own port.
			if isMetadata(addr.Addr()) {
				return &Refused{Host: host, Addr: addr, Why: "a cloud metadata address, which a name in network.allow does not open"}
			}
			for _, s := range r.Services {
				if s.Port != 0 && s.matches("", addr) {
					return &Refused{Host: host, Addr: addr, Why: s.Name + ", one of the worker's own services, which a name in network.allow does not open"}
				}
			}
		}
		return nil
	}
	// A service's own port is named as the service; a local address as
	// what it is; a public one only when a service holds its whole host.
	for _, s := range r.Services {
		if s.Port != 0 && s.matches(host, addr) {
			return &Refused{Host: host, Addr: addr, Why: s.Name + ", one of the worker's own services"}
		}
	}
	if why := Special(addr.Addr()); why != "" {
		return &Refused{Host: host, Addr: addr, Why: why}
	}
	for _, s := range r.Services {
		if s.matches(host, addr) {
			return &Refused{Host: host, Addr: addr, Why: s.Name + "'s host, one of the worker's own services"}
		}
	}
	return nil
}

var (
	metadata = []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254"),
		netip.MustParseAddr("100.100.100.200")}
	cgnat    = netip.MustParsePrefix("100.64.0.0/10")
	benchnet = netip.MustParsePrefix("198.18.0.0/15")
	reserved = netip.MustParsePrefix("240.0.0.0/4")
	thisnet  = netip.MustParsePrefix("0.0.0.0/8")
	nat64    = netip.MustParsePrefix("64:ff9b::/96")
	nat64lo  = netip.MustParsePrefix("64:ff9b:1::/48")
	compat4  = netip.MustParsePrefix("::/96")
	sixto4   = netip.MustParsePrefix("2002::/16")
	teredo   = netip.MustParsePrefix("2001::/32")
)

// Special says why a is not a public address ("" when it is one): a
// loopback, private, link-local, metadata or otherwise local address.
// An IPv4 address carried in IPv6 (mapped, compatible, NAT64, 6to4) is
// judged as the IPv4 address it carries; Teredo's is hidden, so refused.
func Special(a netip.Addr) string {
	a = a.Unmap()
	if v4, ok := embedded4(a); ok {
		return Special(v4)
	}
	if isMetadata(a) {
		return "a cloud metadata address"
	}
	switch {
	case a.IsLoopback():
		return "a loopback address"
	case teredo.Contains(a):
		return "a tunnel (Teredo) address, whose IPv4 end cannot be judged"
	case a.IsUnspecified(), a.Is4() && thisnet.Contains(a):
		return "this machine's unspecified address"
	case a.IsPrivate(), a.Is4() && (cgnat.Contains(a) || benchnet.Contains(a)):
		return "a private address"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "a link-local address"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast address"
	case a.Is4() && (reserved.Contains(a) || a == netip.AddrFrom4([4]byte{255, 255, 255, 255})):
		return "a reserved address"
	case !a.IsValid():
		return "not an address"
	}
	return ""
}

// isMetadata: a is a cloud provider's metadata address.
func isMetadata(a netip.Addr) bool {
	a = a.Unmap()
	if v4, ok := embedded4(a); ok {
		a = v4
	}
	return slices.Contains(metadata, a)
}

// embedded4 is the IPv4 address a NAT64 or 6to4 address carries.
func embedded4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case nat64.Contains(a), nat64lo.Contains(a), compat4.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixto4.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// HostPort is a URL's host:port, its scheme's port where it names none
// ("" for no host).
func HostPort(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" || u.Scheme == "wss" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// Plus is a copy of r (nil: the defaults) that also allows hostport: what
// an operator declared (an http tool's URL, an MCP server's); what it
// redirects to stays under r.
func (r *Rules) Plus(hostport string) *Rules {
	out := &Rules{}
	if r != nil {
		*out = *r
	}
	if e, err := ParseEntry(hostport); err == nil && hostport != "" {
		out.Allow = append(append([]Entry(nil), out.Allow...), e)
	}
	return out
}
