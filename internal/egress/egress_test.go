package egress

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func mustEntries(t *testing.T, ss ...string) []Entry {
	t.Helper()
	var out []Entry
	for _, s := range ss {
		e, err := ParseEntry(s)
		if err != nil {
			t.Fatalf("ParseEntry(%q): %v", s, err)
		}
		out = append(out, e)
	}
	return out
}

func TestParseEntry(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{"10.0.0.0/8", ""}, {"127.0.0.1", ""}, {"127.0.0.1:8080", ""}, {"[::1]:9000", ""}, {"::1", ""},
		{"db.internal", ""}, {"*.corp.example:443", ""}, {"example.com:0", "port must be 1-65535"},
		{"exa mple.com", "neither an address"}, {"", "empty"}, {"http://x", "not a URL"}, {"a:99999", "port must be"},
	} {
		_, err := ParseEntry(tc.in)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ParseEntry(%q) = %v, want %q", tc.in, err, tc.err)
		}
	}
}

func TestCheck(t *testing.T) {
	temporal, _ := ServiceAt("Temporal's frontend", "203.0.113.7")
	store, _ := ServiceAt("the artifact store", "198.51.100.9:9000")
	rules := func(allow ...string) *Rules {
		return &Rules{Allow: mustEntries(t, allow...), Services: []Service{temporal, store}}
	}
	for _, tc := range []struct {
		name, host, addr string
		allow            []string
		why              string // "" = allowed
	}{
		{"public", "example.com", "93.184.215.14:443", nil, ""},
		{"loopback", "127.0.0.1", "127.0.0.1:7243", nil, "a loopback address"},
		{"loopback by name", "localhost", "127.0.0.1:80", nil, "a loopback address"},
		{"ipv6 loopback", "::1", "[::1]:80", nil, "a loopback address"},
		{"mapped loopback", "x", "[::ffff:127.0.0.1]:80", nil, "a loopback address"},
		{"nat64 private", "x", "[64:ff9b::a00:1]:80", nil, "a private address"},
		{"6to4 metadata", "x", "[2002:a9fe:a9fe::]:80", nil, "a cloud metadata address"},
		{"ipv4-compatible loopback", "x", "[::127.0.0.1]:80", nil, "a loopback address"},
		{"local-use nat64 private", "x", "[64:ff9b:1::a00:1]:80", nil, "a private address"},
		{"teredo", "x", "[2001:0:4136:e378:8000:63bf:3fff:fdd2]:80", nil, "Teredo"},
		{"a name does not open metadata", "meta.example", "169.254.169.254:80", []string{"meta.example"}, "does not open"},
		{"a name does not open a service's port", "store.example", "198.51.100.9:9000", []string{"store.example"}, "does not open"},
		{"an address opens a service", "x", "198.51.100.9:9000", []string{"198.51.100.9:9000"}, ""},
		{"private", "x", "10.1.2.3:80", nil, "a private address"},
		{"cgnat", "x", "100.64.1.1:80", nil, "a private address"},
		{"metadata", "x", "169.254.169.254:80", nil, "a cloud metadata address"},
		{"link-local", "x", "169.254.1.1:80", nil, "a link-local address"},
		{"unspecified", "x", "0.0.0.0:80", nil, "unspecified"},
		{"temporal at a public address", "x", "203.0.113.7:7243", nil, "Temporal's frontend"},
		{"store port", "x", "198.51.100.9:9000", nil, "the artifact store"},
		{"store host, other port", "x", "198.51.100.9:80", nil, ""},
		{"another loopback port", "127.0.0.1", "127.0.0.1:4001", nil, "a loopback address"},
		{"allowed range", "x", "10.1.2.3:80", []string{"10.0.0.0/8"}, ""},
		{"allowed address and port", "x", "127.0.0.1:8080", []string{"127.0.0.1:8080"}, ""},
		{"allowed address, other port", "x", "127.0.0.1:8081", []string{"127.0.0.1:8080"}, "a loopback address"},
		{"allowed host", "db.internal", "10.9.9.9:5432", []string{"db.internal"}, ""},
		{"allowed subdomain", "a.corp.example", "10.9.9.9:443", []string{"*.corp.example:443"}, ""},
		{"not the parent", "corp.example", "10.9.9.9:443", []string{"*.corp.example:443"}, "a private address"},
		{"allowed service", "x", "203.0.113.7:7233", []string{"203.0.113.7:7233"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := rules(tc.allow...).Check(tc.host, netip.MustParseAddrPort(tc.addr))
			switch {
			case tc.why == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.why != "" && (err == nil || !strings.Contains(err.Error(), tc.why)):
				t.Fatalf("got %v, want a refusal saying %q", err, tc.why)
			}
		})
	}
}

func TestClientChecksEveryConnection(t *testing.T) {
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "inner") }))
	defer inner.Close()
	outer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inner.URL, http.StatusFound)
	}))
	defer outer.Close()
	hostport := strings.TrimPrefix(outer.URL, "http://")

	_, err := (&Rules{}).Client().Get(inner.URL)
	if _, ok := AsRefused(err); !ok {
		t.Fatalf("a loopback server was reached: %v", err)
	}
	// Allowed to the first server only: its redirect to the second is refused.
	c := (&Rules{Allow: mustEntries(t, hostport)}).Client()
	_, err = c.Get(outer.URL)
	if ref, ok := AsRefused(err); !ok || ref.Addr.String() != strings.TrimPrefix(inner.URL, "http://") {
		t.Fatalf("the redirect was followed: %v", err)
	}
	resp, err := (&Rules{Allow: mustEntries(t, "127.0.0.1")}).Client().Get(outer.URL)
	if err != nil {
		t.Fatalf("allowed: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "inner" {
		t.Fatalf("body %q", b)
	}
	// A unix socket is not a way around it.
	if _, err := (&Rules{}).Dial(t.Context(), "unix", "/run/x.sock"); err == nil || !strings.Contains(err.Error(), "tcp or udp only") {
		t.Fatalf("unix: %v", err)
	}
}

func TestProxy(t *testing.T) {
	var seen http.Header
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		io.WriteString(w, "hello")
	}))
	defer target.Close()
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secure") }))
	defer tls.Close()
	via := func(rules *Rules) *http.Client {
		px := httptest.NewServer(&Proxy{Rules: rules, Mark: http.Header{"Capflow-Plan-Step": {"run-1"}}})
		t.Cleanup(px.Close)
		tr := tls.Client().Transport.(*http.Transport).Clone()
		tr.Proxy = func(*http.Request) (*url.URL, error) { return url.Parse(px.URL) }
		return &http.Client{Transport: tr}
	}
	resp, err := via(&Rules{}).Get(target.URL)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a loopback target through the proxy: %v %v", resp, err)
	}
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "a loopback address") {
		t.Fatalf("refusal %q", b)
	}
	if _, err := via(&Rules{}).Get(tls.URL); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("a CONNECT to loopback: %v", err)
	}
	c := via(&Rules{Allow: mustEntries(t, "127.0.0.1")})
	resp, err = c.Get(target.URL)
	if err != nil || resp.StatusCode != 200 || seen.Get("Capflow-Plan-Step") != "run-1" {
		t.Fatalf("allowed: %v %v %v", resp, err, seen)
	}
	resp, err = c.Get(tls.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	if string(b) != "secure" {
		t.Fatalf("tunnel: %q", b)
	}
}

// TestRoutesToTheRunsServers: a run's connection to loopback at a port
// one of its servers listens on reaches that server (by 127.0.0.1,
// localhost or ::1), another run's does not, and a port of no server is
// refused; nothing of the host's loopback is used.
func TestRoutesToTheRunsServers(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "its server") }))
	defer server.Close()
	unpublish := Publish("run-a", 4000, func() (net.Conn, error) { return net.Dial("tcp", strings.TrimPrefix(server.URL, "http://")) })
	for _, host := range []string{"127.0.0.1", "localhost", "[::1]"} {
		resp, err := (&Rules{}).For("run-a").Client().Get("http://" + host + ":4000/")
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "its server" {
			t.Fatalf("%s: %q", host, b)
		}
	}
	if _, err := (&Rules{}).For("run-b").Client().Get("http://127.0.0.1:4000/"); err == nil {
		t.Fatal("another run reached the server")
	}
	if got := (&Rules{}).For("run-a").LoopbackPorts(); fmt.Sprint(got) != "[4000]" {
		t.Fatalf("loopback ports %v", got)
	}
	unpublish()
	if _, err := (&Rules{}).For("run-a").Client().Get("http://127.0.0.1:4000/"); err == nil {
		t.Fatal("the route outlived its server")
	}
}

// TestThisMachine: the machine's own addresses, not only its loopback,
// are not the run's (a console on 0.0.0.0 is reached on any of them).
func TestThisMachine(t *testing.T) {
	addrs, _ := net.InterfaceAddrs()
	r := &Rules{Services: []Service{ThisMachine()}}
	checked := 0
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil || p.Addr().IsLoopback() {
			continue
		}
		checked++
		err = r.Check("x", netip.AddrPortFrom(p.Addr(), 8080))
		if err == nil {
			t.Errorf("%s, this machine's, was reached", p.Addr())
		}
	}
	if err := r.Check("x", netip.MustParseAddrPort("93.184.215.14:443")); err != nil {
		t.Fatalf("a public address: %v", err)
	}
	t.Logf("%d addresses of this machine checked", checked)
}
