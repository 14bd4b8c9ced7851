package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/examples"
)

// mixPlan is a plan of the mix: its file, what it promises, and the steps
// a script approves.
type mixPlan struct {
	name, file string
	promise    examples.Promise
	approve    []string
	// counted are its steps whose tool writes counter lines (soak.count).
	counted []string
	port    bool // takes a port input (each run its own)
}

// run is one run of the soak.
type run struct {
	i    int
	id   string
	plan *mixPlan

	startedAt, endedAt time.Time
	startErr           string
	result             *client.Result
	// endErr: the run ended without a result (terminated, timed out).
	endErr string
}

// cli runs the capflow CLI against the client's copy of the project and
// returns its exit code and envelope.
func (s *soak) cli(ctx context.Context, args ...string) (int, map[string]any, string) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, s.cfg.CLI, append(args, "--project", s.client, "--output", "json")...)
	cmd.Env, cmd.Dir = s.env, s.client // as a user in the project would
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := s.reaper.run(cmd)
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	var env map[string]any
	_ = json.Unmarshal(out.Bytes(), &env)
	return code, env, strings.TrimSpace(errb.String())
}

// start starts r with `capflow run --detach` under a fixed workflow ID,
// trying again while the cluster is down (a second start of the same ID
// starts nothing: the CLI reports the run it finds).
func (s *soak) start(ctx context.Context, r *run) {
	args := []string{"run", r.plan.file, "--detach", "--id", r.id, "--task-queue", s.cfg.Queue}
	if r.plan.port {
		args = append(args, "--input", "port="+strconv.Itoa(25000+r.i))
	}
	for deadline := time.Now().Add(3 * time.Minute); ; {
		at := time.Now()
		code, env, stderr := s.cli(ctx, args...)
		if code == 0 {
			s.mu.Lock()
			r.startedAt, r.startErr = at, ""
			s.mu.Unlock()
			return
		}
		r.startErr = fmt.Sprintf("exit %d: %v %s", code, env["message"], stderr)
		if time.Now().After(deadline) || !sleep(ctx, 2*time.Second) {
			return
		}
	}
}

// approveSteps answers r's approvals as a script would: `capflow approve`
// until the step is approved (now or before: a refusal that says so).
func (s *soak) approveSteps(ctx context.Context, r *run) {
	for _, step := range r.plan.approve {
		for !s.ended(r) {
			code, env, _ := s.cli(ctx, "approve", r.id, step, "--by", "soak-script", "--comment", "soak")
			msg, _ := env["message"].(string)
			if code == 0 || strings.Contains(msg, "already decided: approved") {
				break
			}
			if !sleep(ctx, 2*time.Second) {
				return
			}
		}
	}
}

func (s *soak) ended(r *run) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return r.result != nil || r.endErr != ""
}

// wait waits for r's result through outages until the deadline.
func (s *soak) wait(ctx context.Context, r *run, deadline time.Time) {
	for time.Now().Before(deadline) {
		wctx, cancel := context.WithDeadline(ctx, deadline)
		res, err := s.tc.Get(r.id).Wait(wctx)
		cancel()
		if err == nil {
			s.mu.Lock()
			r.result, r.endedAt = res, time.Now()
			s.mu.Unlock()
			// Kept for a post-mortem: every step, attempt and host.
			if b, err := json.MarshalIndent(res, "", "  "); err == nil {
				_ = os.WriteFile(s.logPath(r.id+".result.json"), b, 0o644)
			}
			return
		}
		var ended *temporal.WorkflowExecutionError
		if errors.As(err, &ended) {
			s.mu.Lock()
			r.endErr, r.endedAt = err.Error(), time.Now()
			s.mu.Unlock()
			return
		}
		if !sleep(ctx, 2*time.Second) {
			return
		}
	}
}
