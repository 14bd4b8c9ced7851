package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	capflowclient "github.com/capflow/capflow/client"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/mcpserver"
)

// TestHostileMCPArguments drives `capflow mcp`'s tools through the real
// command line parser (the hostile audit's H4 and M4): a text or an id
// that reads as a flag is data, never --output-path; a plan outside the
// project is refused unread.
func TestHostileMCPArguments(t *testing.T) {
	project, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "victim")
	os.WriteFile(victim, []byte("untouched"), 0o644)
	secret := filepath.Join(outside, "plan.yaml")
	os.WriteFile(secret, []byte("name: s\nsteps: [{id: SECRET-ID-789, capability: text.render}]\n"), 0o644)
	srv := mcpserver.New(mcpserver.Options{Exec: execIn, Args: []string{"--output", "json", "--project", project},
		By: "mcp", Root: project, PlanDir: filepath.Join(project, ".capflow", "mcp")})
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "attacker", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(tool string, a map[string]any) string {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: a})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	flag := "--output-path=" + victim
	msg := call("route", map[string]any{"text": flag})
	if !strings.Contains(msg, "no route") {
		t.Errorf("route of a flag-like text: %q", msg)
	}
	for _, tool := range []string{"status", "cancel", "report"} {
		if msg := call(tool, map[string]any{"id": flag}); !strings.Contains(msg, `starts with "-"`) {
			t.Errorf("%s of a flag-like id: %q", tool, msg)
		}
	}
	if msg := call("decide", map[string]any{"id": "r", "step": flag, "action": "approve"}); !strings.Contains(msg, `starts with "-"`) {
		t.Errorf("decide of a flag-like step: %q", msg)
	}
	if b, _ := os.ReadFile(victim); string(b) != "untouched" {
		t.Fatalf("an MCP argument wrote %s: %q", victim, b)
	}
	for _, p := range []string{secret, "../../../../../../" + secret, "/etc/passwd"} {
		msg := call("plan_check", map[string]any{"plan": p})
		if !strings.Contains(msg, "outside the project") || strings.Contains(msg, "SECRET") {
			t.Errorf("plan_check %s: %q", p, msg)
		}
	}
}

// TestParseAgeBounds: --older-than 99999999999d purged every entry (an
// overflow to a negative age); NaNd and Infd passed too (M9).
func TestParseAgeBounds(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7d", 7 * 24 * time.Hour, true}, {"36h", 36 * time.Hour, true}, {"0.5d", 12 * time.Hour, true},
		{"106751d", 106751 * 24 * time.Hour, true},
		{"99999999999d", 0, false}, {"106752d", 0, false}, {"NaNd", 0, false}, {"Infd", 0, false}, {"+Infd", 0, false},
		{"-1d", 0, false}, {"0d", 0, false}, {"-5h", 0, false}, {"lots", 0, false},
	} {
		got, err := parseAge(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseAge(%q) = %s %v, want %s ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// TestPlanTestPrintsNoEscapes: a case name from a case file reaches the
// terminal with its control characters quoted (L11).
func TestPlanTestPrintsNoEscapes(t *testing.T) {
	if got := printable("ok \x1b[2J\x1b]0;owned\x07 case"); got != `ok \x1b[2J\x1b]0;owned\a case` {
		t.Fatalf("%q", got)
	}
	if got := printable("a plain case, ünïcode"); got != "a plain case, ünïcode" {
		t.Fatalf("%q", got)
	}
	// A direction control would show a path reversed (issue 56's gate).
	if got := printable("/tmp/\u202egpj.hs"); got != `/tmp/\u202egpj.hs` {
		t.Fatalf("%q", got)
	}
}

// TestMCPStdioSurvivesGarbage: a line that is not JSON (or nests past the
// decoder's bound) is answered -32700 and the server goes on (L1).
func TestMCPStdioSurvivesGarbage(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	srv := mcpserver.New(mcpserver.Options{Exec: execIn, By: "mcp", Root: t.TempDir()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Run(ctx, stdioTransport(inR, outW)) }()
	go func() {
		fmt.Fprintf(inW, "not json\n%s\n[]\n{}\n{\"jsonrpc\":\"1.0\",\"id\":3,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}   \n",
			strings.Repeat("[", 1001)+strings.Repeat("]", 1001))
	}()
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	var got []string
	for len(got) < 6 && sc.Scan() {
		got = append(got, sc.Text())
	}
	want := []string{"-32700", "-32700", "-32600", "-32600", `"id":3`, `"id":7,"result"`}
	for i, w := range want {
		if i >= len(got) || !strings.Contains(got[i], w) {
			t.Fatalf("answers: %q, want %q", got, want)
		}
	}
}

// TestValidateRefusesWritesToConfiguredPaths: sandbox.write of a folder
// the project's configuration makes the engine trust (its tools_dirs,
// state_dir, policy's folder) is refused, positioned, exit 2 (M3).
func TestValidateRefusesWritesToConfiguredPaths(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "capflow.yaml"), []byte("tools_dirs: [mytools]\nstate_dir: st/state\npolicy: conf/policy.yaml\n"), 0o644)
	tool := filepath.Join(dir, "mytools", "w")
	os.MkdirAll(tool, 0o755)
	os.WriteFile(filepath.Join(tool, "tool.yaml"), []byte("name: w\nversion: 1.0.0\ndescription: writes\ncapabilities: [a.b]\nentrypoint: {type: command, command: [./r]}\nsandbox:\n  write: [mytools/other, st, conf, out]\n"), 0o644)
	code, out, _ := capflow(t, "tools", "validate", "--project", dir, "--output", "json")
	env := envelopeOf(t, out)
	if code != 2 {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, want := range []string{`tool.yaml:7:`, `write \"mytools/other\" would let the tool change mytools`, `write \"st\" would let the tool change st/state`, `write \"conf\" would let the tool change conf/policy.yaml`} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in %s", want, env.Message)
		}
	}
	if strings.Contains(out, `write \"out\"`) {
		t.Errorf("out was refused: %s", out)
	}
}

// TestValidateRefusesWritesToWhatRunsUnconfined: a tool may not write an
// MCP server's script, or the folder holding it, which the worker runs
// outside any sandbox (hostile findings at 6003afe, 4).
func TestValidateRefusesWritesToWhatRunsUnconfined(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "capflow.yaml"), []byte("mcp_servers:\n  s: {command: [python3, mcp/server.py]}\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "mcp", "data"), 0o755)
	os.WriteFile(filepath.Join(dir, "mcp", "server.py"), []byte("print()\n"), 0o644)
	tool := filepath.Join(dir, "tools", "w")
	os.MkdirAll(tool, 0o755)
	os.WriteFile(filepath.Join(tool, "tool.yaml"), []byte("name: w\nversion: 1.0.0\ndescription: writes\ncapabilities: [a.b]\nentrypoint: {type: command, command: [./r]}\nsandbox:\n  write: [mcp, ., out]\n"), 0o644)
	code, out, _ := capflow(t, "tools", "validate", "--project", dir, "--output", "json")
	if code != 2 || !strings.Contains(out, `tool.yaml:7:`) || !strings.Contains(out, `write \"mcp\" would let the tool change mcp`) || !strings.Contains(out, "runs unconfined") {
		t.Fatalf("exit %d: %s", code, out)
	}
	if strings.Contains(out, `write \"out\"`) {
		t.Errorf("out was refused: %s", out)
	}
}

// TestEachErrorOnce: a failure's pretty output says its error once (the
// headline), not again as its result feedback; a bare command group is a
// usage error in every output (issue 38).
func TestEachErrorOnce(t *testing.T) {
	code, out, errb := capflow(t, "plan")
	if code != 2 || strings.Count(out, "needs a subcommand") != 1 || !strings.Contains(errb, "Available Commands") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errb)
	}
	if code, out, _ := capflow(t, "plan", "--output", "json"); code != 2 || !strings.Contains(out, `"exitCode":2`) {
		t.Fatalf("json: exit %d %s", code, out)
	}
}

// TestMCPRouteTextIsBounded: a request text past 64 KiB is refused before
// the router sees it (9 MB took 24 s of CPU).
func TestMCPRouteTextIsBounded(t *testing.T) {
	srv := mcpserver.New(mcpserver.Options{Exec: execIn, By: "mcp", Root: t.TempDir()})
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	start := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "route", Arguments: map[string]any{"text": strings.Repeat("convert video ", 10000)}})
	msg := fmt.Sprint(err)
	if err == nil {
		msg = res.Content[0].(*mcp.TextContent).Text
	}
	if !strings.Contains(msg, "65536") {
		t.Fatalf("a 140 KB request was not refused for its length: %.300s", msg)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %s", time.Since(start))
	}
}

// TestProjectFilesLinkedOutAreNotRead: a tool.yaml, policy.yaml,
// capflow.yaml or case file that is a link out of the project is refused
// unread, and nothing of what it leads to is quoted (hostile findings at
// 6003afe, 15).
func TestProjectFilesLinkedOutAreNotRead(t *testing.T) {
	creds := filepath.Join(t.TempDir(), "credentials")
	os.WriteFile(creds, []byte("[default]\naws_access_key_id = AKIAFAKEFAKE\n"), 0o600)
	for _, link := range []string{"tools/x/tool.yaml", "policy.yaml", "capflow.yaml", "plans/tests/p.yaml"} {
		t.Run(link, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "capflow.yaml"), []byte("active_kits: [core]\n"), 0o644)
			os.MkdirAll(filepath.Join(dir, "plans", "tests"), 0o755)
			os.WriteFile(filepath.Join(dir, "plans", "p.yaml"), []byte("version: 1\nname: p\nsteps:\n  - {id: a, capability: text.render, with: {template: x}}\n"), 0o644)
			os.MkdirAll(filepath.Join(dir, filepath.Dir(link)), 0o755)
			os.Remove(filepath.Join(dir, link))
			if err := os.Symlink(creds, filepath.Join(dir, link)); err != nil {
				t.Fatal(err)
			}
			args := []string{"tools", "validate", "--project", dir}
			if link == "policy.yaml" {
				args = []string{"plan", "check", "--project", dir, filepath.Join(dir, "plans", "p.yaml")}
			}
			if link == "plans/tests/p.yaml" {
				args = []string{"plan", "test", "--project", dir, filepath.Join(dir, "plans", "p.yaml")}
			}
			code, out, errb := capflow(t, args...)
			if code == 0 || strings.Contains(out+errb, "AKIA") || !strings.Contains(out+errb, "leads outside") {
				t.Fatalf("exit %d\n%s\n%s", code, out, errb)
			}
		})
	}
}

// TestToolTextReachesNoTerminalControl: a tool's message, feedback and a
// run's message are printed with their control characters quoted: no
// title set, no screen cleared (hostile findings at 6003afe, 21).
func TestToolTextReachesNoTerminalControl(t *testing.T) {
	evil := "\u001b]0;PWNED\u0007\u001b[2J\u001b[31mred\u0000nul\rback"
	var b bytes.Buffer
	prettyEnvelope(&b, envelope.Envelope{Message: evil, Feedback: []envelope.Feedback{{Phase: "x", Level: "warning", Message: evil, Detail: evil + "\nline two"}}})
	prettyResult(&b, &capflowclient.Result{Plan: "p", Status: "failed", Message: evil, Warnings: []string{evil}}, "")
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\x00\r") || !strings.Contains(out, `\x1b]0;PWNED\a\x1b[2J`) || !strings.Contains(out, "line two") {
		t.Fatalf("%q", out)
	}
}
