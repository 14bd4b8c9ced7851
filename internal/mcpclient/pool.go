// Package mcpclient calls the tools of MCP servers (docs/mcp.md) for the
// worker and the CLI: one session per configured server per process,
// started at first use and started again after it died or hung.
package mcpclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/egress"
	"github.com/capflow/capflow/internal/jsonlines"
)

// DefaultStartTimeout bounds starting a server and its initialize
// handshake unless the server's start_timeout says otherwise.
const DefaultStartTimeout = 30 * time.Second

// Options of a Pool. Logger, LookupEnv and Version may be left zero.
type Options struct {
	Servers map[string]config.MCPServer
	// Root is the project root: a stdio server's working directory unless
	// it names its own (relative to Root).
	Root string
	// Version is capflow's, sent as the client's.
	Version   string
	Logger    hclog.Logger
	LookupEnv func(string) (string, bool)
	// Net are the network rules an HTTP server's connections go through
	// (nil: public addresses only); the server's own address, which the
	// configuration declares, is allowed beside them.
	Net func() *egress.Rules
}

// Pool holds the sessions.
type Pool struct {
	o   Options
	log hclog.Logger

	mu       sync.Mutex
	conns    map[string]*conn
	progress sync.Map // progress token -> func(*mcp.ProgressNotificationParams)
	next     atomic.Int64
}

type conn struct {
	mu     sync.Mutex
	cs     *mcp.ClientSession
	stderr *tail
	// bad: the server wrote a line that is no JSON value (stdio.go).
	bad atomic.Bool
}

// New makes a pool; nothing starts until a tool is called.
func New(o Options) *Pool {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	return &Pool{o: o, log: o.Logger.Named("mcp"), conns: map[string]*conn{}}
}

// Progress is a server's progress on a call.
type Progress = mcp.ProgressNotificationParams

// Call calls a server's tool. Errors carry their contract code: a server
// that cannot be started or that died is DEPENDENCY_UNAVAILABLE; one
// that refuses the call (unknown tool, invalid arguments, garbage) is
// TOOL_FAILURE; a call past ctx's deadline returns ctx's error, and the
// server is stopped (the next call starts it again).
func (p *Pool) Call(ctx context.Context, server, tool string, args any, progress func(*Progress)) (*mcp.CallToolResult, error) {
	cs, c, err := p.session(ctx, server)
	if err != nil {
		return nil, err
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if progress != nil {
		// A random token, kept with the session it was given to: no
		// server guesses another call's token or reports on it (the
		// hostile audit's L2: capflow-N tokens let one server write into
		// another's step).
		tok := fmt.Sprintf("capflow-%d-%s", p.next.Add(1), randomHex(12))
		p.progress.Store(tok, progressOf{cs: cs, f: progress})
		defer p.progress.Delete(tok)
		params.SetProgressToken(tok)
	}
	res, err := cs.CallTool(ctx, params)
	if err == nil {
		return res, nil
	}
	var rpc *jsonrpc.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		p.drop(server, cs, "did not answer "+tool+" in time")
		return nil, ctx.Err()
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.As(err, &rpc) && strings.HasPrefix(rpc.Message, jsonlines.OutOfContract):
		return nil, caperr.New(caperr.ToolFailure, "MCP server %s answered %s out of contract: %s (not one JSON-RPC message)", server, tool, strings.TrimPrefix(rpc.Message, jsonlines.OutOfContract))
	case errors.As(err, &rpc):
		return nil, caperr.New(caperr.ToolFailure, "MCP server %s refused %s: %s", server, tool, rpc.Message)
	}
	if c.bad.Load() {
		p.drop(server, cs, "answered out of contract")
		return nil, caperr.New(caperr.ToolFailure, "MCP server %s answered %s out of contract: a line that is not one JSON-RPC message, or too long (the server is started again for the next call)%s", server, tool, c.stderr.String())
	}
	// A server that still answers a ping sent an answer out of contract;
	// one that does not has died or dropped the connection.
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if cs.Ping(pctx, nil) == nil {
		return nil, caperr.New(caperr.ToolFailure, "MCP server %s answered %s out of contract: %v", server, tool, err)
	}
	p.drop(server, cs, "failed")
	return nil, caperr.New(caperr.DependencyUnavailable, "MCP server %s failed during %s: %v%s", server, tool, err, c.stderr.String())
}

// Tools lists a server's tools and says who it is.
func (p *Pool) Tools(ctx context.Context, server string) ([]*mcp.Tool, *mcp.Implementation, error) {
	cs, _, err := p.session(ctx, server)
	if err != nil {
		return nil, nil, err
	}
	var out []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, nil, caperr.New(caperr.DependencyUnavailable, "MCP server %s: list tools: %v", server, err)
		}
		out = append(out, t)
	}
	return out, cs.InitializeResult().ServerInfo, nil
}

// Close stops every server.
func (p *Pool) Close() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[string]*conn{}
	p.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		if c.cs != nil {
			_ = c.cs.Close()
			c.cs = nil
		}
		c.mu.Unlock()
	}
}

// session is a live session to the server, started when there is none.
func (p *Pool) session(ctx context.Context, name string) (*mcp.ClientSession, *conn, error) {
	p.mu.Lock()
	c, ok := p.conns[name]
	if !ok {
		c = &conn{stderr: &tail{}}
		p.conns[name] = c
	}
	p.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cs != nil {
		return c.cs, c, nil
	}
	cs, err := p.connect(ctx, name, c)
	if err != nil {
		return nil, c, err
	}
	c.cs = cs
	go func() {
		// A server that exits or drops the connection is forgotten: the
		// next call starts it again.
		_ = cs.Wait()
		p.drop(name, cs, "ended")
	}()
	return cs, c, nil
}

// drop forgets a session (and stops its server) unless it was replaced.
func (p *Pool) drop(name string, cs *mcp.ClientSession, why string) {
	p.mu.Lock()
	c := p.conns[name]
	p.mu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	mine := c.cs == cs
	if mine {
		c.cs = nil
	}
	c.mu.Unlock()
	if mine {
		p.log.Warn("MCP server stopped", "server", name, "why", why)
		_ = cs.Close()
	}
}

// progressOf is who a progress token was given to.
type progressOf struct {
	cs *mcp.ClientSession
	f  func(*Progress)
}

func (p *Pool) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	v, ok := p.progress.Load(fmt.Sprint(req.Params.ProgressToken))
	if o, _ := v.(progressOf); ok && o.cs == req.Session {
		o.f(req.Params)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// connect starts the server (a command, or a session with an HTTP
// endpoint) and runs the initialize handshake within its start timeout.
func (p *Pool) connect(ctx context.Context, name string, c *conn) (*mcp.ClientSession, error) {
	stderr := c.stderr
	srv, ok := p.o.Servers[name]
	if !ok {
		return nil, caperr.New(caperr.DependencyUnavailable, "MCP server %q is not configured in this process (mcp_servers of capflow.yaml as it was when the worker started: restart the worker after changing it; docs/mcp.md)", name)
	}
	timeout := DefaultStartTimeout
	if d, err := time.ParseDuration(srv.StartTimeout); err == nil && d > 0 {
		timeout = d
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "capflow", Version: p.o.Version},
		// No roots: a server keeps the folders its configuration gives it.
		&mcp.ClientOptions{ProgressNotificationHandler: p.onProgress, Capabilities: &mcp.ClientCapabilities{}})
	var t mcp.Transport
	if len(srv.Command) > 0 {
		c.bad.Store(false)
		t = &stdioTransport{cmd: p.command(name, srv, stderr), terminate: 2 * time.Second, bad: &c.bad}
	} else {
		t = &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: p.headers(srv)}, DisableStandaloneSSE: true}
	}
	start := time.Now()
	cs, err := client.Connect(cctx, t, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // the caller's time ran out, not the server's
		}
		what := "did not start"
		if cctx.Err() != nil {
			what = fmt.Sprintf("did not finish its initialize handshake within %s (start_timeout)", timeout)
		}
		return nil, caperr.New(caperr.DependencyUnavailable, "MCP server %s %s: %v%s", name, what, err, stderr.String())
	}
	info := cs.InitializeResult().ServerInfo
	p.log.Info("MCP server connected", "server", name, "name", info.Name, "version", info.Version, "took", time.Since(start).Round(time.Millisecond))
	return cs, nil
}

// command is a stdio server's process: its own environment (PATH, HOME,
// the locale, what pass_env names, env), not the worker's whole one.
func (p *Pool) command(name string, srv config.MCPServer, stderr *tail) *exec.Cmd {
	cmd := exec.Command(srv.Command[0], srv.Command[1:]...)
	cmd.Dir = p.o.Root
	if srv.Dir != "" {
		cmd.Dir = srv.Dir
		if !strings.HasPrefix(srv.Dir, "/") {
			cmd.Dir = p.o.Root + "/" + srv.Dir
		}
	}
	for _, k := range append([]string{"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR"}, srv.PassEnv...) {
		if v, ok := p.o.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range srv.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr.reset(p.log.With("server", name))
	cmd.Stderr = stderr
	setProcAttr(cmd)
	return cmd
}

// headers adds an HTTP server's headers and bearer token to each request
// to the server's own origin (scheme and host): a redirect elsewhere gets
// none of them (the hostile audit's M6: the token followed a 307).
func (p *Pool) headers(srv config.MCPServer) http.RoundTripper {
	own, _ := url.Parse(srv.URL)
	h := http.Header{}
	for k, v := range srv.Headers {
		h.Set(k, v)
	}
	if srv.BearerTokenEnv != "" {
		if v, ok := p.o.LookupEnv(srv.BearerTokenEnv); ok {
			h.Set("Authorization", "Bearer "+v)
		}
	}
	var rules *egress.Rules
	if p.o.Net != nil {
		rules = p.o.Net()
	}
	t := rules.Plus(egress.HostPort(srv.URL)).Transport()
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if own != nil && r.URL.Scheme == own.Scheme && strings.EqualFold(r.URL.Host, own.Host) {
			r = r.Clone(r.Context())
			for k, v := range h {
				r.Header[k] = v
			}
		}
		resp, err := t.RoundTrip(r)
		if err == nil && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			// A stream of events is the SDK's to bound, an event at a time
			// (a stream cut here would be read as dropped, and resumed).
			resp.Body = &bounded{ReadCloser: resp.Body, left: MaxAnswer}
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// tail keeps the last lines a server wrote to stderr (named in errors) and
// logs each at debug level.
type tail struct {
	mu    sync.Mutex
	log   hclog.Logger
	lines []string
	part  string
}

const tailLines = 8

// reset starts the tail of a new process.
func (t *tail) reset(log hclog.Logger) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.log, t.lines, t.part = log, nil, ""
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.part + string(b)
	lines := strings.Split(s, "\n")
	t.part = lines[len(lines)-1]
	if len(t.part) > 4096 {
		t.part = t.part[:4096]
	}
	for _, l := range lines[:len(lines)-1] {
		if len(l) > 512 {
			l = l[:512] + "…"
		}
		if t.log != nil {
			t.log.Debug("stderr", "line", l)
		}
		t.lines = append(t.lines, l)
		if len(t.lines) > tailLines {
			t.lines = t.lines[1:]
		}
	}
	return len(b), nil
}

// String is the tail as an error's suffix ("" when the server wrote none).
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return "; its stderr ended: " + strings.Join(t.lines, " | ")
}
