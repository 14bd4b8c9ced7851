// Package console is capflow's web console (docs/console.md): the runs, a
// run's plan as a live graph with its steps' details, run control, and
// the project's plans with their checks. The page is embedded; it reads
// JSON from /api/, whose shapes are the client package's types.
package console

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/project"
)

//go:embed assets
var assets embed.FS

// DefaultAddr is where the console listens unless told otherwise.
const DefaultAddr = "127.0.0.1:8080"

// Options of a console. Addr, Token and Logger may be left zero.
type Options struct {
	// Addr is the listen address (DefaultAddr when empty). An address that
	// is not loopback needs a Token.
	Addr string
	// Token, when set, is required of every page and API call: as
	// "Authorization: Bearer T", or once as ?token=T (kept in a cookie).
	Token string
	// Hosts are more names the console answers to (a reverse proxy's, a
	// DNS name): by default only its own address's IP (and localhost on
	// loopback), so a rebinding name is refused.
	Hosts []string
	// Temporal is the server's address, named when it does not answer.
	Temporal string
	Client   *client.Client
	Project  *project.Project
	Logger   hclog.Logger
}

// CheckAddr refuses to serve a non-local address without a token
// (CONFIG_ERROR): run control must not be open to a network.
func CheckAddr(addr, token string) error { return CheckListen("console", addr, token) }

// CheckListen is CheckAddr for any server of capflow's that controls runs
// (what names it in the error: console, mcp).
func CheckListen(what, addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return caperr.New(caperr.ConfigError, "%s address %q: want HOST:PORT (%v)", what, addr, err)
	}
	if token != "" {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return caperr.New(caperr.ConfigError, "%s address %q is not local: give --token (every request must then carry it) or listen on 127.0.0.1", what, addr)
}

// Server is a console.
type Server struct {
	o   Options
	log hclog.Logger
	svg *svgCache
	// csrf is this process's CSRF token (guard.go); hosts, Options.Hosts
	// and the listen address's name, lower case.
	csrf  string
	hosts map[string]bool

	mu        sync.Mutex
	artifacts *artifacts.Store // opened at the first download
	ended     *endedCache      // run ID -> *ended: an ended run's graph and states
	endedMu   sync.Mutex       // ended runs are read one at a time
	layoutMu  sync.Mutex       // runs' graphs are asked for and laid out one at a time
	health    health           // Temporal's, as last checked (health.go)
}

// New makes a console.
func New(o Options) (*Server, error) {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if err := CheckAddr(o.Addr, o.Token); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	hosts := map[string]bool{}
	for _, h := range o.Hosts {
		hosts[strings.ToLower(h)] = true
	}
	if h, _, err := net.SplitHostPort(o.Addr); err == nil && h != "" && h != "localhost" && net.ParseIP(h) == nil {
		hosts[strings.ToLower(h)] = true
	}
	return &Server{o: o, log: o.Logger.Named("console"), svg: newSVGCache(32), ended: newEndedCache(maxEndedSteps), csrf: newCSRF(), hosts: hosts}, nil
}

// Handler serves the pages, assets and API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	page := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			s.setCSRF(w)
			http.ServeFileFS(w, r, static, name)
		}
	}
	mux.HandleFunc("GET /{$}", page("index.html"))
	mux.HandleFunc("GET /runs/{id}", s.runPage(static))
	mux.HandleFunc("GET /plans", page("plans.html"))
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	s.api(mux)
	mux.HandleFunc("GET /api/csrf", func(w http.ResponseWriter, _ *http.Request) {
		s.setCSRF(w)
		writeJSON(w, map[string]string{"csrf": s.csrf})
	})
	return s.logged(contained(s.guard(s.auth(mux))))
}

// pagePolicy keeps the console's pages to their own origin: no image,
// script, style or request of theirs goes elsewhere, whatever text a
// report, a tool or a model put in them (artifacts set a stricter one).
const pagePolicy = "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

func contained(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", pagePolicy)
		next.ServeHTTP(w, r)
	})
}

// logged logs each request at debug level with how long it took.
func (s *Server) logged(next http.Handler) http.Handler {
	if !s.log.IsDebug() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		next.ServeHTTP(w, r)
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "took", time.Since(start))
	})
}

// Listen binds the console's address (CONFIG_ERROR when it cannot).
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.o.Addr)
	if err != nil {
		return nil, caperr.New(caperr.ConfigError, "console: cannot listen on %s: %v", s.o.Addr, err)
	}
	return ln, nil
}

// Serve serves on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return caperr.Wrap(caperr.InternalError, err, "console")
	}
	return nil
}

const cookieName = "capflow_console"

// auth checks the token on every request: a header, the cookie, or a
// ?token= that sets the cookie (so a link opens the console).
func (s *Server) auth(next http.Handler) http.Handler {
	if s.o.Token == "" {
		return next
	}
	ok := func(got string) bool { return equal(got, s.o.Token) }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t := r.URL.Query().Get("token"); t != "" && ok(t) {
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del("token")
			to := ownPath(r.URL.Path)
			if len(q) > 0 {
				to += "?" + q.Encode()
			}
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
		if h, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found && ok(h) {
			next.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(cookieName); err == nil && ok(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/api/") && !strings.HasPrefix(r.URL.Path, "/assets/") {
			// A person at a browser: a page saying how to get in.
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write(tokenPage)
			return
		}
		writeError(w, http.StatusUnauthorized, caperr.New(caperr.PolicyBlocked, "the console needs its token (open it with ?token=..., or send Authorization: Bearer ...)"))
	})
}

// tokenPage is what a browser without the console's token gets: how to
// open the console, never the token.
var tokenPage = []byte(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>capflow · token needed</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1f2328}header{background:#24292f;color:#fff;padding:.6em 1.2em;font-weight:600}main{max-width:44em;margin:2em auto;padding:0 1.2em}code{background:#f0f1f3;padding:0 .3em;border-radius:3px}.muted{color:#656d76}</style></head>
<body><header>capflow</header>
<main><h1>This console needs its token</h1>
<p>It was started with a token (<code>capflow console --token</code> or <code>CAPFLOW_CONSOLE_TOKEN</code>), and this browser has not given it.</p>
<p>Open this address with <code>?token=</code> and the token after it (the one given to <code>--token</code> or in
<code>CAPFLOW_CONSOLE_TOKEN</code>; capflow prints it nowhere): the console keeps it in a cookie from then on.
Not yours? Ask whoever started the console, or start your own on 127.0.0.1, which needs none.</p>
<p class="muted">Scripts send <code>Authorization: Bearer TOKEN</code> with each request.</p></main>
</body></html>
`)

// runPage serves a run's page: with 404 for a run Temporal does not have,
// the page then saying so (its script reads the API's 404).
func (s *Server) runPage(static fs.FS) http.HandlerFunc {
	page, _ := fs.ReadFile(static, "run.html")
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		s.setCSRF(w)
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if s.o.Client != nil {
			if _, err := s.o.Client.Describe(ctx, r.PathValue("id")); errors.As(err, new(*client.NotFound)) {
				w.WriteHeader(http.StatusNotFound)
			}
		}
		_, _ = w.Write(page)
	}
}

// equal compares secrets in constant time; an empty one never matches.
func equal(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// ownPath is a path of this console to send a browser to: p when it is a
// plain path, else "/" (//host/x, /\host, a tab or other control byte
// would send the browser elsewhere: browsers read \ as / and drop tabs).
func ownPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\") || strings.ContainsFunc(p, unicode.IsControl) {
		return "/"
	}
	return p
}
