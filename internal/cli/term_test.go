package cli

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	capflowclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/wfapi"
	"github.com/capflow/capflow/internal/whatnext"
)

// Colour where a person reads: a terminal, unless NO_COLOR; FORCE_COLOR
// forces it (NO_COLOR still wins); TERM=dumb has none.
func TestColorWanted(t *testing.T) {
	for _, c := range []struct {
		tty  bool
		env  map[string]string
		want bool
	}{
		{true, nil, true},
		{false, nil, false},
		{true, map[string]string{"NO_COLOR": "1"}, false},
		{true, map[string]string{"TERM": "dumb"}, false},
		{false, map[string]string{"FORCE_COLOR": "1"}, true},
		{false, map[string]string{"FORCE_COLOR": "0"}, false},
		{true, map[string]string{"FORCE_COLOR": "1", "NO_COLOR": "1"}, false},
	} {
		if got := colorWanted(c.tty, func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("tty %v env %v: %v", c.tty, c.env, got)
		}
	}
}

// A passing run of many steps fits a screen: the succeeded steps are
// counted, not listed; what did not succeed is; the verdict comes last;
// a pipe gets no escape code.
func TestResultFitsAScreen(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	t.Setenv("FORCE_COLOR", "")
	res := &capflowclient.Result{Status: wfapi.StatusFailed, Plan: "big", Message: "1 step failed"}
	for i := 0; i < 50; i++ {
		res.Steps = append(res.Steps, wfapi.StepResult{ID: "s" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Capability: "x.y", Status: wfapi.StepSucceeded, Attempts: 1})
	}
	res.Steps[7].Status, res.Steps[7].Reason = wfapi.StepFailed, "boom\nmore detail"
	var b bytes.Buffer
	prettyResult(&b, res, "")
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], "failed") || !strings.Contains(lines[1], "boom") || strings.Contains(out, "more detail") ||
		lines[2] != "  ✓ 49 steps succeeded (the report lists each)" || lines[3] != "✗ big failed: 1 step failed" || strings.Contains(out, "\x1b[") {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
}

// The progress line: done of all, the running steps, what waits.
func TestProgressText(t *testing.T) {
	p := &wfapi.Result{Steps: []wfapi.StepResult{{ID: "a", Status: wfapi.StepSucceeded}, {ID: "b", Status: wfapi.StepRunning}, {ID: "c", Status: wfapi.StepWaiting}, {ID: "d", Status: wfapi.StepPending}}}
	if got := progressText(p, []string{"b (dl: 50%)"}); got != "… 1/4 steps done · 1 running: b (dl: 50%) · 1 waiting" {
		t.Fatal(got)
	}
	var b bytes.Buffer
	l := statusLine{s: screen{width: 20}, w: &b}
	l.show("not a terminal")
	l.clear()
	if b.Len() != 0 {
		t.Fatalf("a pipe got %q", b.String())
	}
	l = statusLine{s: screen{live: true, color: true, width: 20}, w: &b}
	l.show("a long progress line past the width")
	if got := b.String(); got != "\x1b[2ma long progress li…\x1b[0m" {
		t.Fatalf("%q", got)
	}
	// Without colour (NO_COLOR): no escape code, the line overwritten
	// with spaces.
	b.Reset()
	l = statusLine{s: screen{live: true, width: 40}, w: &b}
	l.show("… 1/4 steps done")
	l.show("… 2/4")
	l.clear()
	if got := b.String(); got != "… 1/4 steps done\r                \r… 2/4\r     \r" || strings.Contains(got, "\x1b") {
		t.Fatalf("%q", got)
	}
}

// A run whose step waits for a person says so, with the command that
// answers, not just "running".
func TestWaitingHeadline(t *testing.T) {
	p := &capflowclient.Result{WorkflowID: "r1", Status: wfapi.StatusRunning, Message: "running", Steps: []wfapi.StepResult{
		{ID: "build", Status: wfapi.StepSucceeded},
		{ID: "ship", Status: wfapi.StepWaiting, Waiting: &wfapi.Wait{Kind: wfapi.WaitApproval, Prompt: "Ship it?"}},
	}}
	waitingHeadline(p)
	if p.Message != "ship waits for approval: Ship it? (answer: capflow approve r1 ship, or capflow approve --reject r1 ship)" {
		t.Fatal(p.Message)
	}
}

// A failed step's stderr tail is shown with the result, not only in the
// report, and the output ends with what to do next.
func TestResultShowsStderrOfAFailedStep(t *testing.T) {
	res := &capflowclient.Result{WorkflowID: "r1", Status: wfapi.StatusFailed, Plan: "p", Steps: []wfapi.StepResult{{ID: "crash", Status: wfapi.StepFailed,
		Envelope: &capflowclient.Envelope{Error: &capflowclient.ErrorInfo{Code: "TOOL_FAILURE"},
			Feedback: []capflowclient.Feedback{{Phase: "stderr", Detail: "1\n2\n3\n4\n5\n6\nTraceback: boom\n"}}}}}}
	res.Next = whatnext.Of(res)
	res.Report.JSON = ".capflow/runs/r1/report.json"
	var b bytes.Buffer
	prettyResult(&b, res, "")
	out := b.String()
	// It names the file with every line (a trial looked for "its step folder").
	if !strings.Contains(out, "crash's stderr, last lines (.capflow/runs/r1/steps/crash/stderr.log has every line):\n") || strings.Contains(out, "│ 2\n") || !strings.Contains(out, "│ Traceback: boom\n") {
		t.Fatal(out)
	}
	next := "next: crash (TOOL_FAILURE, HIGH): capflow rerun r1 --from crash; " + caperr.Advice(caperr.ToolFailure) + "\n✗ p failed\n"
	if !strings.HasSuffix(out, next) {
		t.Fatalf("does not end with\n%s\n---\n%s", next, out)
	}
}

// An empty list says so instead of a bare header.
func TestTableOrSaysEmpty(t *testing.T) {
	var b strings.Builder
	tableOr(&b, "no runs match", []string{"RUN"}, nil)
	tableOr(&b, "unused", []string{"RUN"}, [][]string{{"r1"}})
	if b.String() != "no runs match\nRUN\nr1\n" {
		t.Fatalf("%q", b.String())
	}
}

// A long message is shown on a line of human output as its first line,
// cut, its closing note kept; the JSON keeps it whole.
func TestBrief(t *testing.T) {
	long := strings.Repeat("x", 5000) + " (not retried: the failure is final)"
	got := brief(long + "\nsecond line")
	if len(got) > briefMax+len("…") || !strings.HasSuffix(got, "… (not retried: the failure is final)") || strings.Contains(got, "second") {
		t.Fatalf("%d bytes: %q", len(got), got)
	}
	// A note with a note inside is kept whole (a trial saw "(not retried:
	// the tool is n… (another attempt could repeat its effects))").
	nested := " (not retried: the tool is not idempotent (another attempt could repeat its effects))"
	if got := brief(strings.Repeat("y", 400) + nested); !strings.HasSuffix(got, "y…"+nested) || len(got) > briefMax+len("…") {
		t.Fatalf("nested note: %q", got)
	}
	if got := brief("short (note)\nmore"); got != "short (note)" {
		t.Fatalf("%q", got)
	}
	if got := brief(strings.Repeat("é", 300)); !utf8.ValidString(got) || len(got) > briefMax+len("…") {
		t.Fatalf("%d bytes, valid %v", len(got), utf8.ValidString(got))
	}
}

// An unknown command names the nearest one, or the group's command of
// that name ("capflow check" gave a trial no hint).
func TestAnUnknownCommandNamesTheOneMeant(t *testing.T) {
	for word, want := range map[string]string{
		"check":    `unknown command "check" for "capflow" (did you mean "plan check"?) (see --help)`,
		"validate": `unknown command "validate" for "capflow" (did you mean "tools validate"?) (see --help)`,
		"staus":    `unknown command "staus" for "capflow" (did you mean "status"?) (see --help)`,
		"zzz":      `unknown command "zzz" for "capflow" (see --help)`,
	} {
		code, out, _ := capflow(t, word, "--output", "json")
		if env := envelopeOf(t, out); code != 2 || env.Message != want {
			t.Errorf("%s: exit %d %q, want %q", word, code, env.Message, want)
		}
	}
}
