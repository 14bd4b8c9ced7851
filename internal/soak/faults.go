package soak

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// Kind is a fault the soak causes.
type Kind string

// The faults of a soak (docs/operations.md#the-soak).
const (
	WorkerKill      Kind = "worker-kill"      // SIGKILL a worker, start it again
	ServerKill      Kind = "server-kill"      // SIGKILL the Temporal server, start it again
	PostgresRestart Kind = "postgres-restart" // restart PostgreSQL
	HostLost        Kind = "host-lost"        // stop a worker and its tools for longer than host_wait
)

// Kinds are the faults in the order a schedule cycles through them.
var Kinds = []Kind{WorkerKill, ServerKill, PostgresRestart, HostLost}

// Fault is one fault of the schedule and, once caused, what happened.
type Fault struct {
	Kind Kind          `json:"kind"`
	At   time.Duration `json:"-"`
	Host int           `json:"host"` // 0-based; for worker-kill and host-lost
	// AtS is when it began, seconds after the soak began.
	AtS   float64 `json:"at_s"`
	TookS float64 `json:"took_s"`
	Error string  `json:"error,omitempty"`
	// Tools is how many tools of the soak's runs were running on the host
	// it hit; InFlight how many runs were under way when it began.
	Tools    int `json:"tools"`
	InFlight int `json:"runs_in_flight"`

	began, ended time.Time
}

// Schedule places n faults evenly over the time runs start in (none in
// the first or the last stretch, so that the first runs start on a quiet
// cluster and the last faults have runs to hit), cycling through the
// kinds and, for the faults of a host, through the hosts.
func Schedule(n int, over time.Duration, hosts int) []Fault {
	out := make([]Fault, n)
	next := 0
	for i := range out {
		k := Kinds[i%len(Kinds)]
		out[i] = Fault{Kind: k, At: over * time.Duration(i+1) / time.Duration(n+1)}
		if k == WorkerKill || k == HostLost {
			out[i].Host = next % hosts
			next++
		}
	}
	return out
}

// Commands are the shell commands that cause the faults of the parts the
// soak does not start itself (the Temporal server, PostgreSQL): scripts/
// cluster.sh's under `make soak`, yours against your own cluster.
type Commands struct {
	ServerKill, ServerStart, PostgresRestart string
}

// cause causes f and returns once the part is back.
func (s *soak) cause(ctx context.Context, f *Fault) error {
	switch f.Kind {
	case WorkerKill:
		h := s.busiest(ctx, f)
		h.kill()
		sleep(ctx, 2*time.Second)
		return h.start(ctx)
	case HostLost:
		h := s.busiest(ctx, f)
		if err := h.freeze(true); err != nil {
			return err
		}
		// Longer than host_wait: the run's host is taken for lost and its
		// steps move on; then the host comes back, late, as hosts do.
		sleep(ctx, s.cfg.HostWait+10*time.Second)
		return h.freeze(false)
	case ServerKill:
		if err := s.shell(ctx, "server-kill", s.cfg.Commands.ServerKill); err != nil {
			return err
		}
		sleep(ctx, 3*time.Second)
		return s.shell(ctx, "server-start", s.cfg.Commands.ServerStart)
	case PostgresRestart:
		return s.shell(ctx, "postgres-restart", s.cfg.Commands.PostgresRestart)
	}
	return fmt.Errorf("unknown fault %q", f.Kind)
}

// shell runs a fault's command, its output in the soak's log folder.
func (s *soak) shell(ctx context.Context, what, line string) error {
	if line == "" {
		return fmt.Errorf("no command for %s (give --%s)", what, what)
	}
	logf, err := os.OpenFile(s.logPath("faults.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "%s %s: %s\n", time.Now().UTC().Format(time.RFC3339Nano), what, line)
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := s.reaper.run(cmd); err != nil {
		return fmt.Errorf("%s: %s: %v (see %s)", what, line, err, s.logPath("faults.log"))
	}
	return nil
}

// faults causes the schedule's faults at their times, one after another.
func (s *soak) faults(ctx context.Context) {
	for i := range s.schedule {
		f := &s.schedule[i]
		if !sleep(ctx, time.Until(s.began.Add(f.At))) {
			return
		}
		// Under runs: a fault of the cluster waits (up to 10 s) for two runs
		// to be under way.
		for wait := time.Now().Add(10 * time.Second); s.inFlight() < 2 && time.Now().Before(wait) && sleep(ctx, 200*time.Millisecond); {
		}
		f.InFlight = s.inFlight()
		f.began = time.Now()
		err := s.cause(ctx, f)
		s.log.Info("fault", "kind", f.Kind, "host", s.hostName(f), "tools", f.Tools, "runs_in_flight", f.InFlight, "error", err)
		if err != nil {
			f.Error = err.Error()
		}
		f.ended = time.Now()
		f.AtS, f.TookS = f.began.Sub(s.began).Seconds(), f.ended.Sub(f.began).Seconds()
	}
}

func (s *soak) hostName(f *Fault) string {
	if f.Kind == WorkerKill || f.Kind == HostLost {
		return s.hosts[f.Host].name
	}
	return "-"
}

// busiest picks the host a fault of a host hits: the one running the most
// tools of the soak's runs (waiting up to 10 s for one that runs any), so
// that the fault lands under steps; the scheduled one on a tie.
func (s *soak) busiest(ctx context.Context, f *Fault) *host {
	for deadline := time.Now().Add(10 * time.Second); ; {
		for i, h := range s.hosts {
			if n := h.tools(s.prefix); n > f.Tools || (n == f.Tools && i == f.Host) {
				f.Host, f.Tools = i, n
			}
		}
		if f.Tools > 0 || time.Now().After(deadline) || !sleep(ctx, 200*time.Millisecond) {
			return s.hosts[f.Host]
		}
	}
}

// sleep waits d or until ctx ends (false then).
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
