package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	capflowclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
)

// Following a run live: its step transitions from the progress query, what
// running steps say from their heartbeats, retries as they happen.

// follow waits for the run, printing step transitions to stderr.
func (a *App) follow(ctx context.Context, run *capflowclient.Run) (*capflowclient.Result, error) {
	done := make(chan error, 1)
	var res *capflowclient.Result
	go func() {
		var err error
		res, err = run.Wait(context.Background())
		done <- err
	}()
	seen := map[string]wfapi.StepState{}
	live := map[string]string{}
	var phase wfapi.RunStatus
	pr := a.newProgress()
	defer pr.line.clear()
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	if !a.showsProgress() {
		tick.Stop() // nothing to print: no queries for the worker to answer
	}
	ticks := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				return nil, caperr.Wrap(caperr.ToolFailure, err, "the run ended with an error")
			}
			pr.transitions(res, seen, &phase)
			pr.line.clear()
			return res, nil
		case <-ctx.Done():
			pr.line.clear()
			fmt.Fprintf(a.Stderr, "\nstopped waiting; the run goes on. Follow it: capflow status %s · stop it: capflow cancel %s\n", run.ID, run.ID)
			return nil, caperr.New(caperr.Cancelled, "stopped waiting for %s (the run is still going)", run.ID)
		case <-tick.C:
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			p, err := run.Progress(qctx)
			cancel()
			if err != nil {
				// No answer (a local step holds the task, its worker is
				// gone): what the server knows still tells the person
				// where each attempt is, a heartbeat overdue included.
				if ticks++; ticks%3 == 0 {
					pr.live(ctx, run, live)
				}
				continue
			}
			pr.transitions(p, seen, &phase)
			// A progress answer costs the worker O(steps): large plans
			// are asked less often (every 300 ms up to 1,000 steps, 3 s
			// from 10,000).
			tick.Reset(min(max(time.Duration(len(p.Steps))*300*time.Microsecond, 300*time.Millisecond), 3*time.Second))
			if ticks++; ticks%3 == 0 && p.Status != "" {
				pr.live(ctx, run, live)
				pr.redraw()
			}
		}
	}
}

var stepMarks = map[wfapi.StepState]string{
	wfapi.StepRunning: "…", wfapi.StepWaiting: "⏸", wfapi.StepSucceeded: "✓", wfapi.StepFailed: "✗", wfapi.StepSkipped: "↷", wfapi.StepCancelled: "⏹", wfapi.StepBlocked: "⛔",
}

// showsProgress: pretty output, or CAPFLOW_PROGRESS=1 with JSON output.
func (a *App) showsProgress() bool {
	return a.progress || !a.jsonOutput() || os.Getenv("CAPFLOW_PROGRESS") == "1"
}

func (pr *progress) transitions(p *capflowclient.Result, seen map[string]wfapi.StepState, phase *wfapi.RunStatus) {
	a := pr.a
	if !a.showsProgress() {
		return
	}
	defer pr.redraw()
	pr.last = p
	if p.Status != *phase && p.Status != "" {
		*phase = p.Status
		if !pr.scr.live || p.Status == wfapi.StatusPaused {
			pr.println(fmt.Sprintf("  [%s]", p.Status))
		}
	}
	for _, s := range p.Steps {
		if seen[s.ID] == s.Status || s.Status == wfapi.StepPending {
			continue
		}
		seen[s.ID] = s.Status
		if pr.scr.live && (s.Status == wfapi.StepRunning || s.Status == wfapi.StepSucceeded) {
			continue // the progress line counts them
		}
		line := fmt.Sprintf("  %s %s · %s", pr.scr.paint(stepColors[s.Status], stepMarks[s.Status]), s.ID, stepWhat(s))
		if s.Tool != "" {
			line += " → " + s.Tool + "@" + s.Version
		}
		line += "  " + string(s.Status)
		if s.Status == wfapi.StepRunning && s.JoinNote != "" {
			line += " (" + s.JoinNote + ")"
		}
		if s.ReusedFrom != "" {
			line += " (reused from " + s.ReusedFrom + ", no tool ran)"
		}
		if s.CachedFrom != "" {
			line += " (cached result of " + s.CachedFrom + ", no tool ran)"
		}
		if s.Status == wfapi.StepWaiting && s.Waiting != nil {
			line += fmt.Sprintf(": %s (answer: %s)", printable(s.Waiting.Prompt), answerCommand(s.Waiting, p.WorkflowID, s.ID))
		} else if s.Status != wfapi.StepRunning && s.Status != wfapi.StepSucceeded && s.Reason != "" {
			line += ": " + printable(brief(s.Reason))
		}
		pr.println(line)
	}
	if p.StepsOmitted > 0 && !pr.scr.live {
		// A large run lists only what did not succeed: say how far it is,
		// when that changed.
		line := fmt.Sprintf("  … %s", countsText(p.StepCounts))
		if seen[progressKey] != wfapi.StepState(line) {
			seen[progressKey] = wfapi.StepState(line)
			pr.println(line)
		}
	}
}

// answerCommand is the command that answers a wait.
func answerCommand(w *wfapi.Wait, run, step string) string {
	if w.Kind == wfapi.WaitApproval && w.Proposal != "" {
		p := w.Proposal[:min(16, len(w.Proposal))]
		return fmt.Sprintf("capflow approve %s %s --proposal %s, or with --reject", run, step, p)
	}
	if w.Kind == wfapi.WaitApproval {
		return fmt.Sprintf("capflow approve %s %s, or capflow approve --reject %s %s", run, step, run, step)
	}
	return fmt.Sprintf("capflow retry %s %s, or skip or fail instead of retry", run, step)
}

// printLive prints what running steps say (their latest feedback event,
// from heartbeat details) and each retry as it happens, once each.
func (pr *progress) live(ctx context.Context, run *capflowclient.Run, seen map[string]string) {
	a := pr.a
	if !a.showsProgress() {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := run.Client().Describe(dctx, run.ID)
	if err != nil {
		return
	}
	for _, pa := range info.Pending {
		step := pa.Step // the step or item, whichever way its attempt runs
		if step == "" {
			continue // capflow's own activities (resolve, finalize, ...)
		}
		if pa.LastFailure != "" && pa.Attempt > 1 {
			key := fmt.Sprintf("%s attempt %d", step, pa.Attempt)
			if _, done := seen[key]; !done {
				seen[key] = ""
				pr.println(fmt.Sprintf("    ↻ %s: attempt %d failed (%s), attempt %d of %d", step, pa.Attempt-1, printable(brief(pa.LastFailure)), pa.Attempt, pa.MaxAttempts))
			}
		}
		// A heartbeat overdue (its worker may be gone) is told once an
		// attempt, with when the step is retried.
		if now := time.Now(); !pa.Started.IsZero() && pa.HeartbeatTimeout > 0 && now.Sub(later(pa.LastHeartbeat, pa.Started)) >= capflowclient.Overdue {
			key := fmt.Sprintf("%s overdue %d", step, pa.Attempt)
			if _, done := seen[key]; !done {
				seen[key] = ""
				pr.println(fmt.Sprintf("    ⚠ %s: %s", step, printable(pa.Line(now))))
			}
		}
		if pa.Heartbeat == nil {
			continue
		}
		hb := *pa.Heartbeat
		if a.verbose {
			pr.printLines(step, hb, seen)
		}
		if hb.Latest == nil {
			continue
		}
		line := printable(fmt.Sprintf("%s: %s", hb.Latest.Phase, caperr.FirstLine(hb.Latest.Message)))
		if seen[step] == line {
			continue
		}
		seen[step] = line
		if pr.scr.live {
			pr.latest[step] = line // on the progress line
			continue
		}
		elapsed := ""
		if !pa.Started.IsZero() {
			elapsed = fmt.Sprintf(" (%s)", time.Since(pa.Started).Round(time.Second))
		}
		pr.println(fmt.Sprintf("    ↳ %s %s%s", step, line, elapsed))
	}
}

// printLines prints the stderr lines of a heartbeat not printed yet (a
// burst of more than wfapi.HeartbeatLines between two heartbeats is told
// as a gap: the step folder's stderr.log has every line).
func (pr *progress) printLines(step string, hb wfapi.Heartbeat, seen map[string]string) {
	key := fmt.Sprintf("%s lines %d", step, hb.Attempt) // each attempt counts its lines from 0
	printed, _ := strconv.Atoi(seen[key])
	if hb.LineSeq <= printed {
		return
	}
	first := hb.LineSeq - len(hb.Lines) // seq of hb.Lines[0], 0-based
	if first > printed {
		pr.println(fmt.Sprintf("    │ %s: … %d line(s) not shown (stderr.log has them)", step, first-printed))
	}
	for i, l := range hb.Lines {
		if first+i >= printed {
			pr.println(fmt.Sprintf("    │ %s: %s", step, printable(l)))
		}
	}
	seen[key] = strconv.Itoa(hb.LineSeq)
}

// progressKey keeps the last progress line of a large run among the seen
// states (no step id has a space).
const progressKey = "progress line"

// countsText says how many steps are in each state, in lifecycle order.
func countsText(c map[wfapi.StepState]int) string {
	total := 0
	for _, n := range c {
		total += n
	}
	var parts []string
	for _, st := range []wfapi.StepState{wfapi.StepSucceeded, wfapi.StepRunning, wfapi.StepPending, wfapi.StepFailed, wfapi.StepSkipped, wfapi.StepCancelled, wfapi.StepBlocked} {
		if c[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[st], st))
		}
	}
	return fmt.Sprintf("%d steps: %s", total, strings.Join(parts, ", "))
}

// progress is a followed run's output on stderr: a line per event, or on
// a terminal, a line per notable event (a failure, a wait, a retry) above
// one progress line redrawn in place.
type progress struct {
	a      *App
	scr    screen
	line   statusLine
	last   *capflowclient.Result
	latest map[string]string // what running steps said last (terminal)
}

func (a *App) newProgress() *progress {
	scr := screenOf(a.Stderr)
	return &progress{a: a, scr: scr, line: statusLine{s: scr, w: a.Stderr}, latest: map[string]string{}}
}

// println prints a line that stays (the progress line redrawn under it).
func (pr *progress) println(text string) {
	pr.line.clear()
	fmt.Fprintln(pr.a.Stderr, text)
}

// redraw shows the progress line from the last answer: counts, and the
// first running steps with what they said last.
func (pr *progress) redraw() {
	if !pr.scr.live || pr.last == nil {
		return
	}
	var running []string
	for _, s := range pr.last.Steps {
		if s.Status != wfapi.StepRunning {
			continue
		}
		if len(running) == 3 {
			running = append(running, "…")
			break
		}
		note := s.ID
		if l := pr.latest[s.ID]; l != "" {
			note += " (" + l + ")"
		}
		running = append(running, note)
	}
	pr.line.show(progressText(pr.last, running))
}

// stepWhat is a step's capability, or for a sub-plan step, its child run.
func stepWhat(s wfapi.StepResult) string {
	switch {
	case s.Capability != "":
		return s.Capability
	case s.Agent != nil:
		a := s.Agent
		return fmt.Sprintf("agent, %d model call(s), %d tokens, $%.4f", a.Spent.LLMCalls, a.Spent.Tokens, a.Spent.USD)
	case s.Child != nil:
		return "sub-plan " + s.Child.WorkflowID
	case s.Tool == "":
		return "—" // not known yet (a busy run's step, from the server)
	}
	return "sub-plan"
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
