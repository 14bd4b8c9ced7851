// Command capflow-soak runs the soak (docs/operations.md#the-soak): capflow
// under a mix of plans on several hosts while the parts underneath die on
// a schedule. make soak runs it on make cluster's shape.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
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
	runs, envErr := strconv.Atoi(envOr("SOAK_RUNS", "60"))
	fs := flag.NewFlagSet("capflow-soak", flag.ContinueOnError)
	c := soak.Config{}
	fs.IntVar(&c.Runs, "runs", runs, "runs of the mix (env SOAK_RUNS)")
	fs.DurationVar(&c.Spread, "spread", 0, "how long runs keep starting (default: 2s a run)")
	fs.IntVar(&c.Faults, "faults", 8, "faults over the spread, cycling worker-kill, server-kill, postgres-restart, host-lost")
	fs.IntVar(&c.Hosts, "hosts", 3, "workers, each a host with its own copy of the project")
	fs.DurationVar(&c.HostWait, "host-wait", 5*time.Second, "the workers' temporal.host_wait")
	fs.DurationVar(&c.RunWait, "run-wait", 5*time.Minute, "how long after the last start runs may take to end")
	fs.StringVar(&c.Project, "project", "bench/soak/project", "the soak's project: its plans (each with an \"# expect: run=STATUS\" line) and tools (relative paths: from the current folder, the repository's root)")
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
	if err := fs.Parse(os.Args[1:]); err == flag.ErrHelp {
		return 0
	} else if err != nil {
		return 2
	}
	if msg := usageError(fs, c, envErr); msg != "" {
		fmt.Fprintln(os.Stderr, "capflow-soak: "+msg)
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
	if msg := setupError(c, *bin); msg != "" {
		fmt.Fprintln(os.Stderr, "capflow-soak: "+msg)
		return 1
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
	c.Log.Info("starting", "runs", c.Runs, "spread", c.Spread, "faults", c.Faults, "hosts", c.Hosts, "work", c.Work, "address", c.Address)
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

// usageError says what is wrong with the command line, every flag at
// fault named ("" if nothing).
func usageError(fs *flag.FlagSet, c soak.Config, envErr error) string {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if fs.NArg() > 0 {
		return fmt.Sprintf("unexpected %q: capflow-soak takes flags only (-h lists them)", fs.Arg(0))
	}
	var probs []string
	bad := func(cond bool, format string, args ...any) {
		if cond {
			probs = append(probs, fmt.Sprintf(format, args...))
		}
	}
	bad(envErr != nil && !given["runs"], "SOAK_RUNS=%q is not a number of runs", os.Getenv("SOAK_RUNS"))
	bad(c.Netns != "auto" && c.Netns != "on" && c.Netns != "off", "--netns %q: give auto, on or off", c.Netns)
	bad(c.Runs < 1 || c.Runs > 10000, "--runs %d: 1 to 10000", c.Runs)
	bad(c.Hosts < 2 || c.Hosts > 16, "--hosts %d: 2 to 16 (a lost host's runs move to another)", c.Hosts)
	bad(c.Faults < 0 || c.Faults > 10000, "--faults %d: 0 to 10000", c.Faults)
	bad(c.Spread < 0 || c.Spread > 24*time.Hour, "--spread %s: 0 (2s a run) to 24h", c.Spread)
	bad(c.RunWait <= 0 || c.RunWait > 24*time.Hour, "--run-wait %s: more than 0, at most 24h", c.RunWait)
	bad(c.HostWait < time.Second || c.HostWait > 24*time.Hour, "--host-wait %s: 1s to 24h (the workers' temporal.host_wait)", c.HostWait)
	bad(math.IsNaN(c.MaxRSSMB) || c.MaxRSSMB <= 0 || c.MaxRSSMB > 1<<20, "--max-rss-mb %v: a number of MB above 0", c.MaxRSSMB)
	if c.Work != "" {
		st, err := os.Stat(c.Work)
		entries, _ := os.ReadDir(c.Work)
		bad(err == nil && !st.IsDir(), "--work %s is a file: give a new or empty folder", c.Work)
		bad(err == nil && st.IsDir() && len(entries) > 0, "--work %s is not empty: give a new or empty folder", c.Work)
	}
	// The schedule cycles worker-kill, server-kill, postgres-restart,
	// host-lost: the commands of the kinds it reaches are needed now, not
	// minutes in.
	need := map[string]string{"--server-kill": c.Commands.ServerKill, "--server-start": c.Commands.ServerStart}
	if c.Faults >= 3 {
		need["--postgres-restart"] = c.Commands.PostgresRestart
	}
	for _, name := range []string{"--server-kill", "--server-start", "--postgres-restart"} {
		v, ok := need[name]
		bad(ok && v == "" && c.Faults >= 2, "%d faults reach the cluster's, but %s is not given (the command that does it; scripts/soak.sh gives make cluster's)", c.Faults, name)
	}
	return strings.Join(probs, "; ")
}

// setupError checks what the soak needs before it copies anything ("" if
// all is there).
func setupError(c soak.Config, bin string) string {
	if _, err := os.Stat(filepath.Join(c.Project, "plans")); err != nil {
		return fmt.Sprintf("no soak project at %s (no plans/ there): run from the repository's root or give --project", c.Project)
	}
	for _, b := range []string{c.Worker, c.CLI} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Sprintf("%s is missing: make build (or give --bin, the folder with capflow and capflow-worker; now %s)", b, bin)
		}
	}
	conn, err := net.DialTimeout("tcp", c.Address, 5*time.Second)
	if err != nil {
		return fmt.Sprintf("cannot reach the Temporal frontend at %s (%v): start the cluster (scripts/soak.sh does) or give --address", c.Address, err)
	}
	conn.Close()
	return ""
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
