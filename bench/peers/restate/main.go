// Command restate-bench is the Restate peer of `make bench-peers`
// (docs/performance.md): a Restate service whose handlers run the
// benchmark's shapes as durable steps (ctx.Run), each journaled by the
// Restate server before the handler goes on. It lives in its own module so
// capflow's go.mod does not depend on Restate.
//
//	Bench/Chain  n: n steps one after another, each doing nothing
//	Bench/Shell  n: n steps one after another, each running `true`
//	Bench/Fanout n: n steps that do nothing, started together, then awaited
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	restate "github.com/restatedev/sdk-go"
	"github.com/restatedev/sdk-go/server"
)

// Bench is the service.
type Bench struct{}

func noop(restate.RunContext) (int, error) { return 1, nil }

func runTrue(restate.RunContext) (int, error) {
	if err := exec.Command("true").Run(); err != nil {
		return 0, err
	}
	return 1, nil
}

// chain runs n steps of step, each after the last.
func chain(ctx restate.Context, n int, step func(restate.RunContext) (int, error)) (int, error) {
	done := 0
	for range n {
		v, err := restate.Run(ctx, step)
		if err != nil {
			return done, err
		}
		done += v
	}
	return done, nil
}

// Chain runs n no-op steps in sequence.
func (Bench) Chain(ctx restate.Context, n int) (int, error) { return chain(ctx, n, noop) }

// Shell runs n steps in sequence, each a `true` process.
func (Bench) Shell(ctx restate.Context, n int) (int, error) { return chain(ctx, n, runTrue) }

// Fanout starts n no-op steps at once and waits for all of them.
func (Bench) Fanout(ctx restate.Context, n int) (int, error) {
	futs := make([]restate.Future, n)
	for i := range futs {
		futs[i] = restate.RunAsync(ctx, noop)
	}
	done := 0
	for f, err := range restate.Wait(ctx, futs...) {
		if err != nil {
			return done, err
		}
		v, err := f.(restate.RunAsyncFuture[int]).Result()
		if err != nil {
			return done, err
		}
		done += v
	}
	return done, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9080", "loopback address to serve on (HTTP/2 cleartext)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logs := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	if err := server.NewRestate().WithLogger(logs, true).Bind(restate.Reflect(Bench{})).Start(ctx, *listen); err != nil {
		fmt.Fprintln(os.Stderr, "restate-bench:", err)
		os.Exit(1)
	}
}
