package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/capflow/capflow/codec"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
)

// codecServerCommand serves the codec-server protocol so the Temporal Web
// UI (and `temporal workflow show --codec-endpoint`) can show payloads
// encrypted with CAPFLOW_PAYLOAD_KEY to whoever can reach it.
func (a *App) codecServerCommand() *cobra.Command {
	var addr string
	var origins []string
	c := &cobra.Command{
		Use:   "codec-server",
		Short: "Serve the Temporal codec-server protocol with this process's payload keys, for the Web UI (until Ctrl-C)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cd, err := codec.FromEnv()
			if err != nil {
				return caperr.Wrap(caperr.ConfigError, err, "payload encryption")
			}
			if !cd.Enabled() {
				return caperr.New(caperr.ConfigError, "%s is not set: there is nothing to decode", codec.KeyEnv)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return caperr.New(caperr.InvalidInput, "cannot listen on %s: %v", addr, err).At("", 0, 0, "--addr")
			}
			srv := &http.Server{Handler: cd.Handler(origins), ReadHeaderTimeout: 5 * time.Second}
			fmt.Fprintf(a.Stderr, "codec server for key %s on http://%s (Web UI origins %v); Ctrl-C stops it\n", cd.KeyID(), ln.Addr(), origins)
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			select {
			case err = <-done:
			case <-a.ctx.Done():
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				err = srv.Shutdown(ctx)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				return caperr.Wrap(caperr.DependencyUnavailable, err, "codec server")
			}
			a.set(envelope.NewBuilder("capflow-codec-server").Succeed("codec server stopped", map[string]any{"addr": ln.Addr().String(), "key_id": cd.KeyID()}), nil)
			return nil
		},
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:8089", "listen address (anyone who reaches it can decrypt: keep it local or behind your proxy's auth)")
	c.Flags().StringArrayVar(&origins, "ui-origin", []string{"http://localhost:8233", "http://127.0.0.1:8233"}, "Web UI origin allowed by CORS (repeatable)")
	return c
}
