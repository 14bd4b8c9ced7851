package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
)

// mcpProject is a copy of the test project whose capflow.yaml names the
// MCP servers from npm (make mcp-servers installs them), with its own
// worker on its own task queue. It returns the folder, the environment
// for capflow and the folder the filesystem server may touch.
func mcpProject(t *testing.T, queue string) (string, []string, string) {
	t.Helper()
	bin := filepath.Join(h.repo, "testdata", "mcp-servers", "node_modules", ".bin")
	if _, err := os.Stat(filepath.Join(bin, "mcp-server-everything")); err != nil {
		t.Fatalf("the MCP servers from npm are not installed (make mcp-servers): %v", err)
	}
	dir := projectCopy(t)
	files := filepath.Join(dir, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "capflow.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, fmt.Sprintf(`
mcp_servers:
  everything:
    command: [%s/mcp-server-everything, stdio]
  filesystem:
    command: [%s/mcp-server-filesystem, %s]
    start_timeout: 20s
  bad:
    command: [python3, %s]
`, bin, bin, files, filepath.Join(h.repo, "e2e", "testdata", "mcp", "bad_server.py"))...)
	if err := os.WriteFile(filepath.Join(dir, "capflow.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=" + queue}
	workerAt(t, dir, env...)
	return dir, env, files
}

// Tools of MCP servers no one here wrote become capflow tools: imported,
// checked (draft-07 schemas in the data-flow check), and run in plans
// mixed with native tools, data flowing between them; a tool's error, a
// server killed mid-step and a hung call each end as the contract says.
func TestMCPServersAsTools(t *testing.T) {
	dir, env, files := mcpProject(t, "capflow-mcp")
	capflow := func(args ...string) (int, runResult, string) {
		t.Helper()
		code, e, stderr := h.capflowAt(t, dir, env, args...)
		var r runResult
		if strings.HasPrefix(e.ToolID, "capflow-run") || strings.HasPrefix(e.ToolID, "capflow-status") {
			data(t, e, &r)
		}
		if r.Status == "" {
			r.Status, r.Message = fmt.Sprint(e.Success), e.Message
		}
		return code, r, stderr
	}
	for _, server := range []string{"everything", "filesystem", "bad"} {
		if code, r, stderr := capflow("tools", "import-mcp", server); code != 0 {
			t.Fatalf("import-mcp %s: exit %d %s\n%s", server, code, r.Message, stderr)
		}
	}
	man, err := os.ReadFile(filepath.Join(dir, "tools", "everything-get-structured-content", "tool.yaml"))
	if err != nil || !strings.Contains(string(man), "- everything.get_structured_content") || !strings.Contains(string(man), "tool: get-structured-content") {
		t.Fatalf("the imported manifest: %v\n%s", err, man)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	report := filepath.Join(files, "report.txt")
	mix := write("mix", fmt.Sprintf(`name: mcp-mix
steps:
  - {id: sum, capability: everything.get_sum, with: {a: 2, b: 3}}
  - {id: weather, capability: everything.get_structured_content, with: {location: Chicago}}
  - id: render
    capability: text.render
    with: {template: "{{.t}} degrees; {{.s}}", values: {t: "${steps.weather.data.temperature}", s: "${steps.sum.data.content.0.text}"}}
  - {id: write, capability: filesystem.write_file, with: {path: %q, content: "${steps.render.data.text}"}}
  - {id: read, capability: filesystem.read_text_file, needs: [write], with: {path: %q}}
  - {id: long, capability: everything.trigger_long_running_operation, with: {duration: 1, steps: 4}}
outputs:
  text: ${steps.read.data.content}
`, report, report))
	code, r, stderr := capflow("run", mix)
	if code != 0 || r.Status != "passed" {
		t.Fatalf("exit %d %s: %s %v\n%s", code, r.Status, r.Message, r.Gaps, stderr)
	}
	want := "36 degrees; The sum of 2 and 3 is 5."
	if got, _ := os.ReadFile(report); string(got) != want || r.Outputs["text"] != want {
		t.Fatalf("the file %q, the output %v; want %q", got, r.Outputs["text"], want)
	}
	var progress []string
	for _, f := range r.step(t, "long").Envelope.Feedback {
		if f.Phase == "progress" {
			progress = append(progress, f.Message)
		}
	}
	// The SDK hands notifications over on their own goroutine: the last
	// may come after the answer, and is then not the step's.
	if n := len(progress); n < 3 || progress[0] != "1 of 4" || progress[n-1] != fmt.Sprintf("%d of 4", n) {
		t.Fatalf("the long step's progress feedback: %q", progress)
	}

	// A type error between an MCP tool's draft-07 output and another's
	// input is a gap before anything runs; so is a server not configured.
	bad := write("bad", `name: mcp-bad
steps:
  - {id: weather, capability: everything.get_structured_content, with: {location: Chicago}}
  - {id: write, capability: filesystem.write_file, with: {path: x, content: "${steps.weather.data.temperature}"}}
`)
	code, e, _ := h.capflowAt(t, dir, env, "plan", "check", bad)
	if code == 0 || !strings.Contains(fmt.Sprint(e.Data), "the producer gives number, the consumer needs string") {
		t.Fatalf("plan check of a type error: exit %d %v", code, e.Data)
	}
	nope := filepath.Join(dir, "tools", "nope-echo")
	_ = os.MkdirAll(nope, 0o755)
	_ = os.WriteFile(filepath.Join(nope, "tool.yaml"), []byte("name: nope-echo\nversion: 1.0.0\ndescription: x\ncapabilities: [nope.echo]\ninput_schema: {type: object}\nentrypoint: {type: mcp, server: nope, tool: echo}\n"), 0o644)
	code, e, _ = h.capflowAt(t, dir, env, "plan", "check", write("nope", "name: mcp-nope\nsteps:\n  - {id: a, capability: nope.echo}\n"))
	if code == 0 || !strings.Contains(fmt.Sprint(e.Data), `MCP server \"nope\" is not configured`) && !strings.Contains(fmt.Sprint(e.Data), `MCP server "nope" is not configured`) {
		t.Fatalf("plan check with an unconfigured server: exit %d %v", code, e.Data)
	}

	// isError: the tool's text, TOOL_FAILURE.
	denied := write("denied", "name: mcp-denied\nsteps:\n  - {id: read, capability: filesystem.read_text_file, with: {path: /etc/hostname}, retry: {max_attempts: 1}}\n")
	code, r, _ = capflow("run", denied)
	if s := r.step(t, "read"); code == 0 || s.Status != "failed" || s.Envelope.Error == nil || caperr.Code(s.Envelope.Error.Code) != caperr.ToolFailure ||
		!strings.Contains(s.Envelope.Message, "Access denied - path outside allowed directories") {
		t.Fatalf("a tool's isError: exit %d %+v %+v %+v", code, s, s.Envelope, s.Envelope.Error)
	}

	// The server killed mid-step: the attempt fails DEPENDENCY_UNAVAILABLE,
	// the retry starts the server again and passes.
	killed := write("killed", `name: mcp-killed
steps:
  - {id: long, capability: everything.trigger_long_running_operation, with: {duration: 4, steps: 4}, retry: {max_attempts: 2, initial_interval: 1s}}
`)
	id := startDetachedAt(t, dir, env, killed)
	waitStepRunning(t, id, "long")
	// The server starts with the step's call (node takes its time on a
	// loaded machine): kill it a second into the call.
	server := filepath.Join(h.repo, "testdata", "mcp-servers") + ".*everything"
	for deadline := time.Now().Add(30 * time.Second); exec.Command("pgrep", "-f", server).Run() != nil && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if out, err := exec.Command("pkill", "-KILL", "-f", server).CombinedOutput(); err != nil {
		t.Fatalf("pkill: %v %s", err, out)
	}
	code, r, stderr = capflow("status", id, "--follow")
	if st := r.step(t, "long"); code != 0 || r.Status != "passed" || st.Attempts != 2 {
		t.Fatalf("after the server was killed: exit %d %s (%s), attempts %d\n%s", code, r.Status, r.Message, st.Attempts, stderr)
	}
	if !strings.Contains(h.workerLog(), "MCP server everything failed during trigger-long-running-operation") {
		t.Fatal("the worker did not log the server's failure")
	}

	// A call past the step's timeout: TASK_TIMEOUT, and the server is
	// started again for the next step.
	hung := write("hung", `name: mcp-hung
failure_policy: continue_all
steps:
  - {id: long, capability: everything.trigger_long_running_operation, with: {duration: 30, steps: 2}, timeout: 2s, retry: {max_attempts: 1}}
  - {id: after, capability: everything.echo, needs: [long], when: "true", with: {message: hi}}
  - {id: other, capability: everything.echo, with: {message: still here}}
`)
	code, r, stderr = capflow("run", hung)
	if st := r.step(t, "long"); code == 0 || st.Status != "failed" || st.Envelope.Error == nil || caperr.Code(st.Envelope.Error.Code) != caperr.TaskTimeout {
		t.Fatalf("a hung call: exit %d %+v\n%s", code, st, stderr)
	}
	if st := r.step(t, "other"); st.Status != "succeeded" {
		t.Fatalf("the step beside it: %+v", st)
	}

	// A server that answers out of contract (a result that is no
	// CallToolResult): TOOL_FAILURE, the server kept; one that exits
	// mid-call: DEPENDENCY_UNAVAILABLE, and the next call starts it again.
	code, r, stderr = capflow("run", write("bad", `name: mcp-bad-server
failure_policy: continue_all
max_parallel: 1
defaults: {retry: {max_attempts: 1}}
steps:
  - {id: wrong, capability: bad.wrong}
  - {id: truncated, capability: bad.truncated, timeout: 2m}
  - {id: die, capability: bad.die}
  - {id: ok, capability: bad.ok}
`))
	codes := map[string]string{}
	for _, st := range r.Steps {
		codes[st.ID] = string(st.Status)
		if st.Envelope != nil && st.Envelope.Error != nil {
			codes[st.ID] += " " + string(st.Envelope.Error.Code)
		}
	}
	// A line cut short fails its step at once (not at its 2-minute
	// timeout) and the server is started again for the next (M8).
	if fmt.Sprint(codes) != "map[die:failed DEPENDENCY_UNAVAILABLE ok:succeeded truncated:failed TOOL_FAILURE wrong:failed TOOL_FAILURE]" ||
		!strings.Contains(r.step(t, "wrong").Envelope.Message, "out of contract") || !strings.Contains(r.step(t, "truncated").Envelope.Message, "not one JSON-RPC message") {
		t.Fatalf("a misbehaving server: exit %d %v\n%s", code, codes, stderr)
	}
}
