package egress

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Proxy is an HTTP proxy (plain requests and CONNECT tunnels) whose every
// connection goes through the rules: what a browser or a confined tool
// with `network: true` reaches the network through. It answers 403 with
// the refusal, so the tool's own error says why.
type Proxy struct {
	Rules *Rules
	// Mark is set on every plain request: the header that names a plan's
	// step (capflow's own servers refuse requests carrying it).
	Mark http.Header
	// OnRefused is told of every refused connection (may be nil).
	OnRefused func(error)

	mu        sync.Mutex
	transport *http.Transport
	tunnels   map[net.Conn]bool
	closed    bool
}

// Close ends the proxy's tunnels and idle connections: its tree or browser
// has ended (the http.Server serving it does not know of hijacked ones).
func (p *Proxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for c := range p.tunnels {
		c.Close()
	}
	p.tunnels = nil
	if p.transport != nil {
		p.transport.CloseIdleConnections()
	}
	return nil
}

// track keeps c to close with the proxy; false once it is closed.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if p.tunnels == nil {
		p.tunnels = map[net.Conn]bool{}
	}
	for _, c := range cs {
		p.tunnels[c] = true
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.tunnels, c)
	}
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	if r.URL.Host == "" || r.URL.Scheme != "http" {
		http.Error(w, "capflow's egress proxy forwards http:// requests and CONNECT tunnels only", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	if p.transport == nil {
		p.transport = p.Rules.Transport()
		p.transport.DisableCompression = true
	}
	tr := p.transport
	p.mu.Unlock()
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for h := range hopByHop {
		out.Header.Del(h)
	}
	for k, v := range p.Mark {
		out.Header[k] = v
	}
	resp, err := tr.RoundTrip(out)
	if err != nil {
		p.refuse(w, err)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if hopByHop[http.CanonicalHeaderKey(k)] {
			continue
		}
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// hopByHop are the headers of one hop, never passed on.
var hopByHop = map[string]bool{"Proxy-Connection": true, "Proxy-Authorization": true, "Proxy-Authenticate": true, "Connection": true,
	"Keep-Alive": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true}

func (p *Proxy) refuse(w http.ResponseWriter, err error) {
	if ref, ok := AsRefused(err); ok {
		if p.OnRefused != nil {
			p.OnRefused(ref)
		}
		http.Error(w, "capflow: "+ref.Error(), http.StatusForbidden)
		return
	}
	http.Error(w, "capflow: "+err.Error(), http.StatusBadGateway)
}

func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	up, err := p.Rules.Dial(r.Context(), "tcp", r.Host)
	if err != nil {
		p.refuse(w, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "no tunnel here", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !p.track(down, up) {
		down.Close()
		up.Close()
		return
	}
	defer p.untrack(down, up)
	_, _ = io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n")
	if n := buf.Reader.Buffered(); n > 0 {
		b, _ := buf.Reader.Peek(n)
		_, _ = up.Write(b)
	}
	Splice(down, up)
}

// Splice copies both ways until either side ends, then closes both.
func Splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if c, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = c.CloseWrite()
		} else {
			_ = dst.SetDeadline(time.Now())
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
	a.Close()
	b.Close()
}
