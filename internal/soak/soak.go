// Package soak runs capflow for a while under a mix of plans on several
// hosts while the parts underneath die on a schedule, and checks that
// every run ended as its plan promised, that nothing which is not
// idempotent ran twice, that no process outlived its run and that no
// worker grew past its bound (docs/operations.md#the-soak). make soak runs it
// on make cluster's shape; any cluster will do, given the commands that
// kill and restart its parts.
package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/examples"
	"github.com/capflow/capflow/internal/plan"
	"github.com/capflow/capflow/internal/temporalx"
)

// Config is a soak.
type Config struct {
	Runs     int           // runs of the mix, started evenly over Spread
	Spread   time.Duration // how long runs keep starting
	Faults   int           // faults, evenly over Spread (cycling through Kinds)
	Hosts    int           // workers, each a host with its own project copy
	HostWait time.Duration // the workers' temporal.host_wait
	RunWait  time.Duration // how long after the last start runs may take to end

	Project, Kits string // the soak's project (plans, tools) and the kits it links
	Worker, CLI   string // capflow-worker and capflow
	Work          string // hosts' copies and logs go here (a new or empty folder)
	Address       string
	Queue         string
	// WorkerEnv is added to the workers' environment: the shared store
	// (CAPFLOW_ARTIFACTS_URL) and its credentials, say.
	WorkerEnv []string
	Commands  Commands
	// Infra are the programs the fault commands start (adopted by the
	// soak when their script exits): not orphans.
	Infra []string
	// Netns: each host in a network namespace of its own ("auto": where
	// the machine allows, "on": or fail, "off").
	Netns string
	// MaxRSSMB bounds each worker's peak resident set.
	MaxRSSMB float64
	Log      hclog.Logger
}

type soak struct {
	cfg      Config
	log      hclog.Logger
	env      []string
	client   string
	hosts    []*host
	reaper   *reaper
	tc       *client.Client
	began    time.Time
	schedule []Fault
	prefix   string
	// netns says whether hosts have network namespaces of their own, and
	// why not when they do not.
	netns    bool
	netnsWhy string

	mu   sync.Mutex
	runs []*run
}

// Run runs the soak and returns its report (nil and an error when it
// could not run at all).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	s, err := newSoak(cfg)
	if err != nil {
		return nil, err
	}
	mix, err := readMix(cfg.Project)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, h := range s.hosts {
			h.stop()
			if h.ns != nil {
				h.ns.close()
			}
		}
	}()
	if err := s.network(ctx); err != nil {
		return nil, err
	}
	for _, h := range s.hosts {
		if err := h.start(ctx); err != nil {
			return nil, err
		}
	}
	if err := s.dial(); err != nil {
		return nil, err
	}
	s.began = time.Now()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go s.sampleMemory(sctx)
	go s.reaper.reap(sctx)
	faultsDone := make(chan struct{})
	go func() { s.faults(sctx); close(faultsDone) }()
	s.startAll(sctx, mix)
	<-faultsDone
	stop()
	return s.report(), nil
}

func newSoak(cfg Config) (*soak, error) {
	r, err := newReaper(cfg.Infra)
	if err != nil {
		return nil, fmt.Errorf("cannot become the subreaper of what the soak starts: %v", err)
	}
	s := &soak{cfg: cfg, log: cfg.Log, reaper: r, schedule: Schedule(cfg.Faults, cfg.Spread, cfg.Hosts),
		prefix: fmt.Sprintf("soak-%s-%x-", time.Now().UTC().Format("0102-150405"), os.Getpid()%0xfff)}
	s.env = append(os.Environ(), "CAPFLOW_TEMPORAL_ADDRESS="+cfg.Address, "CAPFLOW_TEMPORAL_TASK_QUEUE="+cfg.Queue)
	if err := os.MkdirAll(filepath.Join(cfg.Work, "logs"), 0o755); err != nil {
		return nil, err
	}
	s.client = filepath.Join(cfg.Work, "client")
	if err := prepare(cfg.Project, cfg.Kits, s.client); err != nil {
		return nil, err
	}
	for i := range cfg.Hosts {
		name := fmt.Sprintf("host-%d", i+1)
		h := &host{name: name, dir: filepath.Join(cfg.Work, name), logFile: s.logPath(name + ".log"), worker: cfg.Worker, reaper: r}
		if err := prepare(cfg.Project, cfg.Kits, h.dir); err != nil {
			return nil, err
		}
		h.env = append(append(append([]string{}, s.env...), "CAPFLOW_LOG_LEVEL=info",
			"CAPFLOW_TEMPORAL_HOST_WAIT="+cfg.HostWait.String(),
			"CAPFLOW_OWNERSHIP_KEY_FILE="+filepath.Join(cfg.Work, name+".ownership.key")), cfg.WorkerEnv...)
		s.hosts = append(s.hosts, h)
	}
	return s, nil
}

// network gives each host a network namespace of its own where it may:
// its worker reaches the cluster through forwarders, as another machine
// would through the network.
func (s *soak) network(ctx context.Context) error {
	if s.cfg.Netns == "off" {
		s.netnsWhy = "--netns off"
		return nil
	}
	if why := netnsAvailable(); why != "" {
		if s.cfg.Netns == "on" {
			return fmt.Errorf("--netns on, but hosts cannot have network namespaces here: %s", why)
		}
		s.netnsWhy = why
		s.log.Warn("hosts share the machine's network", "why", why)
		return nil
	}
	targets := loopbackAddrs(append([]string{s.cfg.Address}, s.cfg.WorkerEnv...)...)
	for i, h := range s.hosts {
		n, err := newNetns(ctx, i, targets)
		if err != nil {
			return err
		}
		h.ns = n
		for j, kv := range h.env {
			if strings.HasPrefix(kv, "CAPFLOW_TEMPORAL_ADDRESS=") || slices.Contains(s.cfg.WorkerEnv, kv) {
				h.env[j] = n.rewrite(kv)
			}
		}
	}
	s.netns = true
	return nil
}

func (s *soak) logPath(name string) string { return filepath.Join(s.cfg.Work, "logs", name) }

// dial connects the soak's own client (it waits for results with it) as
// the CLI does, from the client's copy of the project.
func (s *soak) dial() error {
	for _, kv := range []string{"CAPFLOW_TEMPORAL_ADDRESS=" + s.cfg.Address, "CAPFLOW_TEMPORAL_TASK_QUEUE=" + s.cfg.Queue} {
		k, v, _ := strings.Cut(kv, "=")
		_ = os.Setenv(k, v)
	}
	cfg, err := config.Load(config.Options{Project: s.client})
	if err != nil {
		return err
	}
	tc, err := temporalx.Dial(context.Background(), cfg, hclog.NewNullLogger())
	if err != nil {
		return err
	}
	s.tc = client.New(tc, s.cfg.Queue)
	return nil
}

// CounterCapability is the soak's non-idempotent tool, which writes a
// counter line per start (bench/soak/project/tools/count).
const CounterCapability = "soak.count"

// readMix reads the soak's plans and what each promises.
func readMix(project string) ([]*mixPlan, error) {
	files, _ := filepath.Glob(filepath.Join(project, "plans", "*.yaml"))
	sort.Strings(files)
	var mix []*mixPlan
	for _, f := range files {
		pr, err := examples.Read(f)
		if err != nil {
			return nil, err
		}
		if pr.Run == "" {
			return nil, fmt.Errorf("%s: no `# expect: run=STATUS` line: the soak cannot judge its runs", f)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		p, probs := plan.Parse(f, b)
		if len(probs) > 0 {
			return nil, probs
		}
		m := &mixPlan{name: strings.TrimSuffix(filepath.Base(f), ".yaml"), file: filepath.Join("plans", filepath.Base(f)), promise: pr}
		for _, st := range p.Steps {
			switch st.Capability {
			case "flow.approve":
				m.approve = append(m.approve, st.ID)
			case CounterCapability:
				m.counted = append(m.counted, st.ID)
			}
		}
		_, m.port = p.Inputs["port"]
		mix = append(mix, m)
	}
	if len(mix) == 0 {
		return nil, fmt.Errorf("no plans in %s", filepath.Join(project, "plans"))
	}
	return mix, nil
}

// startAll starts the runs evenly over the spread, each run's plan the
// next of the mix, and waits for every one to end (or RunWait after the
// last start).
func (s *soak) startAll(ctx context.Context, mix []*mixPlan) {
	var wg sync.WaitGroup
	every := s.cfg.Spread / time.Duration(max(s.cfg.Runs, 1))
	deadline := s.began.Add(s.cfg.Spread + s.cfg.RunWait)
	for i := range s.cfg.Runs {
		if !sleep(ctx, time.Until(s.began.Add(every*time.Duration(i)))) {
			break
		}
		m := mix[i%len(mix)]
		r := &run{i: i, plan: m, id: fmt.Sprintf("%s%03d-%s", s.prefix, i, m.name)}
		s.mu.Lock()
		s.runs = append(s.runs, r)
		s.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.start(ctx, r)
			if r.startedAt.IsZero() {
				return
			}
			if len(m.approve) > 0 {
				go s.approveSteps(ctx, r)
			}
			s.wait(ctx, r, deadline)
		}()
	}
	wg.Wait()
}

// inFlight counts the runs started and not ended.
func (s *soak) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.runs {
		n += b2i(!r.startedAt.IsZero() && r.result == nil)
	}
	return n
}

// sampleMemory records each worker's peak resident set every half second.
func (s *soak) sampleMemory(ctx context.Context) {
	for sleep(ctx, 500*time.Millisecond) {
		for _, h := range s.hosts {
			h.sample()
		}
	}
}
