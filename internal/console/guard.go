package console

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/caperr"
)

// The console's guard (docs/console.md, Security), with or without a
// token: a request whose Host is not the console's own address (DNS
// rebinding), whose Origin is another site's, that a browser marks
// cross-site, or that a plan's http.request step sent (it carries
// client.PlanStepHeader), is refused 403; a
// control request (POST) must be application/json and carry the
// per-process CSRF token the page carries (a cookie it reads and sends
// back as a header): no other page can send either.

const (
	csrfCookie = "capflow_csrf"
	// CSRFHeader carries the CSRF token on control requests.
	CSRFHeader = "X-Capflow-Csrf"
)

func newCSRF() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func forbid(w http.ResponseWriter, format string, args ...any) {
	writeError(w, http.StatusForbidden, caperr.New(caperr.PolicyBlocked, format, args...))
}

// Foreign says why a request to one of capflow's HTTP surfaces (what: "the
// console", "capflow mcp") comes from where none may: a Host that is not
// the surface's own address (DNS rebinding; hosts are names it also
// answers to), another site's Origin, a browser's cross-site request, or
// a plan's step (it carries client.PlanStepHeader). "" when none.
func Foreign(what string, hosts map[string]bool, r *http.Request) string {
	switch {
	case !ownHost(hosts, r):
		return fmt.Sprintf("%s answers only at its own address, not Host %q", what, r.Host)
	case !sameOrigin(r):
		return fmt.Sprintf("%s takes no request from another site (Origin %q)", what, r.Header.Get("Origin"))
	case r.Header.Get("Sec-Fetch-Site") == "cross-site":
		return what + " takes no cross-site request"
	case r.Header.Get(client.PlanStepHeader) != "":
		return "a plan's step may not drive " + what
	}
	return ""
}

// guard runs before the token check.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		why := Foreign("the console", s.hosts, r)
		switch {
		case why != "":
			forbid(w, "%s", why)
		case r.Method != http.MethodGet && r.Method != http.MethodHead && !isJSON(r):
			forbid(w, "a control request must be Content-Type: application/json")
		case r.Method != http.MethodGet && r.Method != http.MethodHead && !s.csrfOK(r):
			forbid(w, "a control request must carry the console's %s header (the page sends it; GET /api/csrf gives it)", CSRFHeader)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// ownHost: the Host names the address the request came in on (its port,
// and its IP, or localhost on loopback), or a name given in Options.Hosts
// (with any port or none: a reverse proxy's name is its own).
func ownHost(hosts map[string]bool, r *http.Request) bool {
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = r.Host, ""
	}
	if hosts[strings.ToLower(host)] {
		return true
	}
	if port == "" {
		return false
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	lhost, lport, err := net.SplitHostPort(local.String())
	if err != nil || port != lport {
		return false
	}
	host = strings.ToLower(host)
	lip := net.ParseIP(lhost)
	if ip := net.ParseIP(host); ip != nil {
		return ip.Equal(lip) || (ip.IsLoopback() && lip.IsLoopback())
	}
	return host == "localhost" && lip.IsLoopback()
}

// sameOrigin: no Origin (not a browser's cross-origin request), or the
// console's own.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, r.Host)
}

func isJSON(r *http.Request) bool {
	t, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && t == "application/json"
}

func (s *Server) csrfOK(r *http.Request) bool {
	return equal(r.Header.Get(CSRFHeader), s.csrf)
}

// setCSRF gives a page the CSRF token: a cookie its script reads (a page
// of another site can neither read it nor send the header).
func (s *Server) setCSRF(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: s.csrf, Path: "/", SameSite: http.SameSiteStrictMode})
}
