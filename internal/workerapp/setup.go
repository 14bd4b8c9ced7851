package workerapp

import (
	"context"
	"flag"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/buildinfo"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/console"
	"github.com/capflow/capflow/internal/telemetry"
	"github.com/capflow/capflow/internal/temporalx"
)

// configure loads the configuration the flags name, after checking the
// console's address (false: refused, logged).
func configure(f flags, log hclog.Logger) (*config.Config, bool) {
	if f.consoleAddr != "" {
		if err := console.CheckAddr(f.consoleAddr, f.consoleToken); err != nil {
			log.Error("console", "error", err.Error())
			return nil, false
		}
	}
	if f.project == "" && f.config == "" {
		// As the CLI finds it: a worker and a command started in the same
		// folder work in the same project.
		wd, _ := os.Getwd()
		dir, found, err := config.FindProject(wd)
		if err != nil {
			log.Error("configuration", "error", err.Error())
			return nil, false
		}
		if !found {
			log.Warn("no "+config.FileName+" in this folder or above: the defaults are used, with this folder as the project (--project names another)", "folder", wd)
		}
		f.project = dir
	}
	cfg, err := config.Load(config.Options{Project: f.project, File: f.config})
	if err != nil {
		log.Error("configuration", "error", err.Error())
		return nil, false
	}
	if f.queue != "" {
		cfg.Temporal.TaskQueue = f.queue
	}
	return cfg, true
}

// payloadsSummary is the start-up line's word on payloads.
func payloadsSummary() string {
	if cd, _ := temporalx.PayloadCodec(); cd != nil && cd.Enabled() {
		return "encrypted (AES-256-GCM, key " + cd.KeyID() + ")"
	}
	return "plain"
}

// flags are the worker's command line.
type flags struct {
	project, config, queue, metricsAddr, consoleAddr, consoleToken string
}

func parseFlags(args []string, stderr io.Writer) (flags, bool) {
	var f flags
	fs := flag.NewFlagSet("capflow-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.project, "project", "", "project folder (default: the nearest folder with capflow.yaml, from the current one up)")
	fs.StringVar(&f.config, "config", "", "config file (default: <project>/capflow.yaml)")
	fs.StringVar(&f.queue, "task-queue", "", "task queue to poll (default: temporal.task_queue)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", os.Getenv("CAPFLOW_METRICS_ADDR"), "serve Prometheus /metrics and /healthz on HOST:PORT (default: off; env CAPFLOW_METRICS_ADDR)")
	fs.StringVar(&f.consoleAddr, "console-addr", os.Getenv("CAPFLOW_CONSOLE_ADDR"), "serve the web console on HOST:PORT (default: off; env CAPFLOW_CONSOLE_ADDR; docs/console.md)")
	fs.StringVar(&f.consoleToken, "console-token", os.Getenv("CAPFLOW_CONSOLE_TOKEN"), "the token the console requires (needed off loopback; env CAPFLOW_CONSOLE_TOKEN)")
	return f, fs.Parse(args) == nil
}

// profile starts the diagnostics for performance work the environment
// asks for: a CPU profile of the worker's whole life, written when the
// returned func runs (CAPFLOW_CPUPROFILE); a heap profile of the moment
// each time the worker gets SIGUSR1 (CAPFLOW_HEAPPROFILE; kill -USR1 <pid>).
func profile(ctx context.Context) func() {
	if f := os.Getenv("CAPFLOW_HEAPPROFILE"); f != "" {
		go heapOnSignal(ctx, f)
	}
	if f := os.Getenv("CAPFLOW_CPUPROFILE"); f != "" {
		if out, err := os.Create(f); err == nil {
			_ = pprof.StartCPUProfile(out)
			return func() { pprof.StopCPUProfile(); out.Close() }
		}
	}
	return func() {}
}

// buildName names this build: its VCS revision where Go stamped one, else
// the version make gives it (git describe). "" where neither tells one
// build from another (go run; a tree with changes, whose builds would all
// share a name, and with it Temporal's reset points and bad-binary marks):
// the SDK then names it by a hash of the binary.
func buildName() string {
	rev, changed := buildinfo.Revision()
	switch {
	case rev != "" && !changed:
		return Version + "@" + rev
	case rev == "" && Version != "dev" && !strings.HasSuffix(Version, "-dirty"):
		return Version
	}
	// A build with changes, or unnamed: what the linker hashed names it.
	if id := buildinfo.ContentID(); id != "" {
		return Version + "+" + id
	}
	return ""
}

// tracesTo is the start-up line's word on tracing.
func tracesTo(cfg *config.Config) string {
	if u, err := telemetry.TracesURL(cfg.Telemetry.OTLPEndpoint); err == nil {
		return u
	}
	return "off"
}

// configFile names the configuration file the worker took ("none: the
// defaults" when it found none).
func configFile(cfg *config.Config) string {
	if cfg.File == "" {
		return "none: the defaults"
	}
	return cfg.File
}
