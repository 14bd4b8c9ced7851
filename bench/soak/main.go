// Command capflow-soak runs the soak (docs/operations.md#soak): capflow
// under a mix of plans on several hosts while the parts underneath die on
// a schedule. make soak runs it on make cluster's shape.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/logging"
	"github.com/capflow/capflow/internal/soak"
)

func main() { os.Exit(run()) }

func run() int {
	runs, err := strconv.Atoi(envOr("SOAK_RUNS", "60"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "capflow-soak: SOAK_RUNS=%q is not a number of runs\n", os.Getenv("SOAK_RUNS"))
		return 2
	}
	fs := flag.NewFlagSet("capflow-soak", flag.ContinueOnError)
	c := soak.Config{}
	fs.IntVar(&c.Runs, "runs", runs, "runs of the mix (env SOAK_RUNS)")
	fs.DurationVar(&c.Spread, "spread", 0, "how long runs keep starting (default: 2s a run)")
	fs.IntVar(&c.Faults, "faults", 8, "faults over the spread, cycling worker-kill, server-kill, postgres-restart, host-lost")
	fs.IntVar(&c.Hosts, "hosts", 3, "workers, each a host with its own copy of the project")
	fs.DurationVar(&c.HostWait, "host-wait", 5*time.Second, "the workers' temporal.host_wait")
	fs.DurationVar(&c.RunWait, "run-wait", 5*time.Minute, "how long after the last start runs may take to end")
	fs.StringVar(&c.Project, "project", "bench/soak/project", "the soak's project: its plans (each with an `# expect:` line) and tools")
	fs.StringVar(&c.Kits, "kits", "kits", "the kits folder the project copies link")
	bin := fs.String("bin", "bin", "the folder with capflow and capflow-worker")
	fs.StringVar(&c.Work, "work", "", "where hosts' copies and logs go (default: a new folder in the system's temp)")
	fs.StringVar(&c.Address, "address", envOr("CAPFLOW_TEMPORAL_ADDRESS", "127.0.0.1:7233"), "the Temporal frontend")
	fs.StringVar(&c.Queue, "task-queue", "capflow-soak", "the workers' task queue")
	store := fs.String("store", os.Getenv("SOAK_STORE_URL"), "the shared artifact store the workers use (CAPFLOW_ARTIFACTS_URL; env SOAK_STORE_URL)")
	fs.StringVar(&c.Commands.ServerKill, "server-kill", os.Getenv("SOAK_SERVER_KILL"), "shell command that SIGKILLs the Temporal server (env SOAK_SERVER_KILL)")
	fs.StringVar(&c.Commands.ServerStart, "server-start", os.Getenv("SOAK_SERVER_START"), "shell command that starts it again and returns once it serves (env SOAK_SERVER_START)")
	fs.StringVar(&c.Commands.PostgresRestart, "postgres-restart", os.Getenv("SOAK_POSTGRES_RESTART"), "shell command that restarts PostgreSQL (env SOAK_POSTGRES_RESTART)")
	infra := fs.String("infra", "temporal-server,temporal-ui-server,postgres,runuser,versitygw", "programs the fault commands start: not orphans when the soak adopts them")
	fs.StringVar(&c.Netns, "netns", "auto", "each host in a network namespace of its own: auto (where the machine allows: root and ip(8)), on, off")
	fs.Float64Var(&c.MaxRSSMB, "max-rss-mb", 512, "each worker's bound")
	out := fs.String("out", "soak.json", "where the report goes")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if c.Netns != "auto" && c.Netns != "on" && c.Netns != "off" {
		fmt.Fprintf(os.Stderr, "capflow-soak: --netns %q: give auto, on or off\n", c.Netns)
		return 2
	}
	if c.Runs < 1 || c.Hosts < 2 || c.Faults < 0 {
		fmt.Fprintln(os.Stderr, "capflow-soak: --runs must be at least 1 and --hosts at least 2 (a lost host's runs move to another)")
		return 2
	}
	if c.Spread == 0 {
		c.Spread = time.Duration(c.Runs) * 2 * time.Second
	}
	c.Worker, c.CLI = abs(filepath.Join(*bin, "capflow-worker")), abs(filepath.Join(*bin, "capflow"))
	c.Project, c.Kits = abs(c.Project), abs(c.Kits)
	c.Infra = strings.Split(*infra, ",")
	if *store != "" {
		c.WorkerEnv = append(c.WorkerEnv, "CAPFLOW_ARTIFACTS_URL="+*store)
	}
	if c.Work == "" {
		d, err := os.MkdirTemp("", "capflow-soak-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "capflow-soak:", err)
			return 1
		}
		c.Work = d
	}
	c.Log = logging.New("soak", os.Stderr, hclog.Info)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c.Log.Info("soak", "runs", c.Runs, "spread", c.Spread, "faults", c.Faults, "hosts", c.Hosts, "work", c.Work, "address", c.Address)
	rep, err := soak.Run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "capflow-soak:", err)
		return 1
	}
	rep.Print(os.Stdout)
	b, _ := json.MarshalIndent(rep, "", "  ")
	_ = os.MkdirAll(filepath.Dir(*out), 0o755)
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "capflow-soak:", err)
		return 1
	}
	fmt.Printf("written: %s\n", *out)
	if !rep.Passed {
		return 1
	}
	return 0
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}
