package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Dial connects as the rules allow: the address is checked in the
// dialer's Control hook, after DNS, on the very socket about to connect,
// for every address tried and every redirect's connection.
func (r *Rules) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return nil, fmt.Errorf("%s: a run reaches the network over tcp or udp only", network)
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if n, err := strconv.ParseUint(port, 10, 16); err == nil && strings.HasPrefix(network, "tcp") {
		if route := r.route(host, uint16(n)); route != nil {
			return route() // one of the run's servers, in its namespace
		}
	}
	d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(_, resolved string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(resolved)
			if err != nil {
				return fmt.Errorf("%s: %w", resolved, err)
			}
			return r.Check(host, ap)
		}}
	return d.DialContext(ctx, network, address)
}

// Transport is an HTTP transport whose every connection goes through
// Dial. It never uses the worker's proxy settings: a proxy would be the
// only address checked.
func (r *Rules) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = r.Dial
	return t
}

// Client is an HTTP client over Transport.
func (r *Rules) Client() *http.Client { return &http.Client{Transport: r.Transport()} }

// AsRefused finds the refusal in err, if the rules made it.
func AsRefused(err error) (*Refused, bool) {
	var ref *Refused
	ok := errors.As(err, &ref)
	return ref, ok
}
