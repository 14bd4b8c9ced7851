package workerapp

import (
	"context"

	"github.com/hashicorp/go-hclog"
	sdkclient "go.temporal.io/sdk/client"

	capflowclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/console"
	"github.com/capflow/capflow/internal/project"
	"github.com/capflow/capflow/internal/temporalx"
)

// serveConsole serves the web console beside the worker (--console-addr)
// until ctx ends; the address is checked before the worker dials.
func serveConsole(ctx context.Context, addr, token string, c sdkclient.Client, proj *project.Project, log hclog.Logger) error {
	tc := capflowclient.New(c, proj.Config.Temporal.TaskQueue, capflowclient.WithConverters(temporalx.DataConverter(), temporalx.FailureConverter()))
	srv, err := console.New(console.Options{Addr: addr, Token: token, Client: tc, Project: proj, Logger: log})
	if err != nil {
		return err
	}
	ln, err := srv.Listen()
	if err != nil {
		return err
	}
	log.Info("console", "url", "http://"+ln.Addr().String()+"/")
	proj.AddService("the console", ln.Addr().String())
	go func() {
		if err := srv.Serve(ctx, ln); err != nil {
			log.Error("console", "error", err.Error())
		}
	}()
	return nil
}
