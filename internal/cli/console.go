package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	capflowclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/console"
	"github.com/capflow/capflow/internal/envelope"
)

// consoleCommand serves the web console (docs/console.md) until Ctrl-C.
func (a *App) consoleCommand() *cobra.Command {
	var addr, token string
	var hosts []string
	c := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console: runs, a run's plan as a live graph with run control, the project's plans (until Ctrl-C)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if token == "" {
				token = os.Getenv("CAPFLOW_CONSOLE_TOKEN")
			}
			if err := console.CheckAddr(addr, token); err != nil {
				return err
			}
			return a.withClient(func(ctx context.Context, cfg *config.Config, tc *capflowclient.Client) error {
				srv, err := console.New(console.Options{Addr: addr, Token: token, Hosts: hosts, Temporal: cfg.Temporal.Address, Client: tc, Project: a.proj, Logger: a.log})
				if err != nil {
					return err
				}
				ln, err := srv.Listen()
				if err != nil {
					return err
				}
				url := "http://" + ln.Addr().String() + "/"
				if token != "" {
					url += "?token=TOKEN (the token you gave; capflow prints it nowhere)"
				}
				fmt.Fprintf(a.Stderr, "capflow console on %s (Temporal %s); Ctrl-C stops it\n", url, cfg.Temporal.Address)
				if err := srv.Serve(a.ctx, ln); err != nil {
					return err
				}
				a.set(envelope.NewBuilder("capflow-console").Succeed("console stopped", map[string]any{"addr": ln.Addr().String()}), nil)
				return nil
			})
		},
	}
	c.Flags().StringVar(&addr, "addr", console.DefaultAddr, "listen address (not local: --token is required)")
	c.Flags().StringVar(&token, "token", "", "a token every request must carry (default $CAPFLOW_CONSOLE_TOKEN)")
	c.Flags().StringSliceVar(&hosts, "allow-host", nil, "another name the console answers to (a reverse proxy's; by default only its address, and localhost on loopback)")
	return c
}
