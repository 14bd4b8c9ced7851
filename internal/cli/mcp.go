package cli

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/console"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/jsonlines"
	"github.com/capflow/capflow/internal/mcpserver"
)

// mcpCommand serves capflow to MCP clients (docs/mcp.md): over stdio, or
// streamable HTTP with --http.
func (a *App) mcpCommand() *cobra.Command {
	var httpAddr, token, by string
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve capflow's tools (route, plan_check, run, status, decide, cancel, report) to MCP clients over stdio, or --http ADDR",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := a.loadProject()
			if err != nil {
				return err
			}
			args := []string{"--output", "json", "--project", p.Config.Root}
			if a.configFile != "" {
				args = append(args, "--config", a.configFile)
			}
			srv := mcpserver.New(mcpserver.Options{Exec: execIn, Args: args, By: by, Version: Version, Root: p.Config.Root,
				PlanDir: filepath.Join(p.Config.Abs(p.Config.StateDir), "mcp")})
			if httpAddr == "" {
				// stdout is the protocol's: the closing envelope goes to stderr.
				a.Stdout = a.Stderr
				err = srv.Run(a.ctx, stdioTransport(os.Stdin, os.Stdout))
				if err != nil && a.ctx.Err() == nil && !errors.Is(err, io.EOF) {
					return caperr.Wrap(caperr.InternalError, err, "mcp over stdio")
				}
				a.set(envelope.NewBuilder("capflow-mcp").Succeed("the MCP client closed the session", nil), nil)
				return nil
			}
			return a.serveMCPHTTP(srv, httpAddr, token)
		},
	}
	c.Flags().StringVar(&httpAddr, "http", "", "serve streamable HTTP on ADDR (e.g. 127.0.0.1:8090) instead of stdio")
	c.Flags().StringVar(&token, "token", "", "with --http: a bearer token every request must carry (default $CAPFLOW_MCP_TOKEN; required off loopback)")
	c.Flags().StringVar(&by, "by", "mcp", "who decisions made through MCP are recorded as")
	return c
}

func (a *App) serveMCPHTTP(srv *mcp.Server, addr, token string) error {
	if token == "" {
		token = os.Getenv("CAPFLOW_MCP_TOKEN")
	}
	if err := console.CheckListen("mcp", addr, token); err != nil {
		return err
	}
	if token == "" {
		fmt.Fprintf(a.Stderr, "capflow mcp: no token (--token or $CAPFLOW_MCP_TOKEN): anyone on this machine can start, decide and cancel runs through %s\n", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return caperr.New(caperr.ConfigError, "mcp: cannot listen on %s: %v", addr, err)
	}
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	if token != "" {
		next, want := h, []byte("Bearer "+token)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
				http.Error(w, "capflow mcp needs its token (Authorization: Bearer ...)", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	h = guardMCP(h)
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-a.ctx.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}()
	fmt.Fprintf(a.Stderr, "capflow mcp on http://%s/ (streamable HTTP); Ctrl-C stops it\n", ln.Addr())
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return caperr.Wrap(caperr.InternalError, err, "mcp")
	}
	a.set(envelope.NewBuilder("capflow-mcp").Succeed("mcp stopped", map[string]any{"addr": ln.Addr().String()}), nil)
	return nil
}

// guardMCP refuses, before the token check, what the console refuses:
// another Host, another site's Origin, a plan's step (console.Foreign).
func guardMCP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := console.Foreign("capflow mcp", nil, r); why != "" {
			http.Error(w, why, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// execIn runs one command in this process for the MCP server: like Main,
// under ctx, with the live progress lines on stderr even in JSON output.
func execIn(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return (&App{Stdout: stdout, Stderr: stderr, ctx: ctx, progress: true}).main(args)
}

// stdioTransport is the SDK's stdio transport with each line a client
// sends checked first: a line that is not one JSON-RPC message (not JSON,
// nested too deep, longer than the SDK's bound: -32700; JSON but no
// message: -32600) is answered with that error and passed over, instead
// of ending the server (the hostile audit's L1).
func stdioTransport(stdin io.Reader, stdout io.Writer) mcp.Transport {
	out := &lockedWriter{w: stdout}
	in := jsonlines.New(stdin, mcp.DefaultMaxLineLength, func(f jsonlines.Fault) error {
		what := map[int]string{-32700: "Parse error: ", -32600: "Invalid Request: "}[f.Code]
		id := f.ID
		if id == nil {
			id = json.RawMessage("null")
		}
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": f.Code, "message": what + f.Reason}})
		_, err := out.Write(append(msg, '\n'))
		return err
	})
	return &mcp.IOTransport{Reader: io.NopCloser(in), Writer: out}
}

// lockedWriter writes whole messages one at a time: the SDK's, and the
// parse errors the reader sends.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }
