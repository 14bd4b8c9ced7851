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
	once      sync.Once
	transport *http.Transport
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	if r.URL.Host == "" || (r.URL.Scheme != "http" && r.URL.Scheme != "ws") {
		http.Error(w, "capflow's egress proxy forwards http:// requests and CONNECT tunnels only", http.StatusBadRequest)
		return
	}
	p.once.Do(func() {
		p.transport = p.Rules.Transport()
		p.transport.DisableCompression = true
	})
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
		out.Header.Del(h)
	}
	for k, v := range p.Mark {
		out.Header[k] = v
	}
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		p.refuse(w, err)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

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
