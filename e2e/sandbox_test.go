package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sandboxTool writes a hostile command tool into the test project: a shell
// script, with its manifest's sandbox: block (docs/sandbox.md).
func sandboxTool(t *testing.T, name, sandbox, body string) {
	t.Helper()
	sandboxToolAt(t, h.project, name, sandbox, body)
}

// sandboxToolAt is sandboxTool in the project at project.
func sandboxToolAt(t *testing.T, project, name, sandbox, body string) {
	t.Helper()
	dir := filepath.Join(project, "tools", "sbx-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf(`name: sbx-%s
version: 1.0.0
description: a hostile tool (%s)
capabilities: [sbx.%s]
input_schema: {type: object}
entrypoint: {type: command, command: [./run.sh], result: exit_code}
%s`, name, name, strings.ReplaceAll(name, "-", "_"), sandbox)
	if err := os.WriteFile(filepath.Join(dir, "tool.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
}

// uniqueSleep is a command line no other process has, found by pgrep -f.
func uniqueSleep() string {
	n := time.Now().UnixNano()
	return fmt.Sprintf("sleep %d.%03d", 300000+n%100000, n/1000%1000)
}

func running(marker string) bool {
	out, _ := exec.Command("pgrep", "-f", marker).Output()
	return len(strings.TrimSpace(string(out))) > 0
}

// assertGone fails unless no process matches marker within 15 s (a tool
// that ignores SIGTERM is killed after the worker's 5 s grace), printing
// what ps shows.
func assertGone(t *testing.T, marker string) {
	t.Helper()
	for i := 0; i < 300 && running(marker); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if running(marker) {
		out, _ := exec.Command("ps", "-eo", "pid,ppid,args").Output()
		t.Fatalf("%q is still running:\n%s", marker, out)
	}
}

// Hostile command tools under the default confinement and their declared
// limits: each outcome exact, nothing left running.
func TestSandboxHostileTools(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for c, err := l.Accept(); err == nil; c, err = l.Accept() {
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	escaped := filepath.Join(h.project, "escaped-by-tool.txt")
	daemon, stubborn := uniqueSleep(), uniqueSleep()
	sandboxTool(t, "write-outside", "", fmt.Sprintf("echo pwned > %q; echo ok > \"$CAPFLOW_WORKDIR/mine.txt\"\n", escaped))
	sandboxTool(t, "connect-out", "", fmt.Sprintf(`exec python3 -c 'import socket; s=socket.socket(); s.settimeout(3); print("open" if s.connect_ex(("127.0.0.1", %d)) == 0 else "refused")'`+"\n", port))
	sandboxTool(t, "allocate", "sandbox: {memory: 256MiB}", "exec python3 -c 'b = bytearray(3 << 30); print(len(b))'\n")
	sandboxTool(t, "fork-bomb", "sandbox: {pids: 64}", "bomb() { bomb | bomb & }; bomb; sleep 30\n")
	sandboxTool(t, "daemon", "", fmt.Sprintf("setsid %s </dev/null >/dev/null 2>&1 &\nsleep 0.3\n", daemon))
	sandboxTool(t, "stubborn", "", fmt.Sprintf("trap '' TERM\nsetsid sh -c \"trap '' TERM; %s\" </dev/null >/dev/null 2>&1 &\nwhile :; do sleep 1; done\n", stubborn))
	plan := h.writePlan(t, "sandbox-hostile", `name: sandbox-hostile
failure_policy: continue_all
steps:
  - {id: write-outside, capability: sbx.write_outside}
  - {id: connect-out, capability: sbx.connect_out}
  - {id: allocate, capability: sbx.allocate, retry: {max_attempts: 1}}
  - {id: fork-bomb, capability: sbx.fork_bomb, retry: {max_attempts: 1}}
  - {id: daemon, capability: sbx.daemon}
  - {id: stubborn, capability: sbx.stubborn, timeout: 3s, retry: {max_attempts: 1}}
`)
	code, r := h.run(t, plan)
	if code != 1 || r.Status != "failed" {
		t.Fatalf("exit %d status %s", code, r.Status)
	}
	// The write outside failed inside the tool (read-only file system);
	// the step folder took its file.
	if s := r.step(t, "write-outside"); s.Status != "succeeded" || fileExists(escaped) {
		t.Fatalf("write-outside: %s, %s exists: %v", s.Status, escaped, fileExists(escaped))
	}
	// The host's loopback server is out of reach: the tool's connect fails.
	if s := r.step(t, "connect-out"); s.Status != "succeeded" || fmt.Sprint(s.Envelope.Data.(map[string]any)["stdout"]) != "refused\n" {
		t.Fatalf("connect-out reached the host: %s %+v", s.Status, s.Envelope)
	}
	for id, want := range map[string]string{"allocate": "passed its memory limit (256MiB", "fork-bomb": "passed its pids limit (64"} {
		s := r.step(t, id)
		if s.Status != "failed" || s.Envelope.Error == nil || s.Envelope.Error.Code != "RESOURCE_EXHAUSTED" || !strings.Contains(s.Envelope.Message, want) {
			t.Fatalf("%s: %s %+v", id, s.Status, s.Envelope)
		}
	}
	if s := r.step(t, "daemon"); s.Status != "succeeded" {
		t.Fatalf("daemon: %s %+v", s.Status, s.Envelope)
	}
	if s := r.step(t, "stubborn"); s.Status != "failed" || s.Envelope.Error == nil || s.Envelope.Error.Code != "TASK_TIMEOUT" {
		t.Fatalf("stubborn: %s %+v", s.Status, s.Envelope)
	}
	assertGone(t, daemon)
	assertGone(t, stubborn)
	assertGone(t, "sbx-fork-bomb")

	// capflow tools run confines exactly as the worker does.
	code, env, stderr := h.capflow(t, "tools", "run", "sbx.connect_out")
	if code != 0 || fmt.Sprint(env.Data.(map[string]any)["stdout"]) != "refused\n" || !strings.Contains(fmt.Sprint(env.Feedback), "confined") {
		t.Fatalf("tools run: exit %d %+v\n%s", code, env, stderr)
	}
	code, env, _ = h.capflow(t, "tools", "run", "sbx.allocate")
	if code != 1 || env.Error == nil || env.Error.Code != "RESOURCE_EXHAUSTED" {
		t.Fatalf("tools run sbx.allocate: exit %d %+v", code, env)
	}
}

// A worker stopped mid-step (SIGTERM: it stops its activities and exits;
// SIGKILL: the kernel's parent-death signal) takes the step's whole
// confined tree with it, children that called setsid included.
func TestSandboxWorkerDeathLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			// A project and a worker of its own: the test runs beside others.
			dir := projectCopy(t)
			queue := []string{"CAPFLOW_TEMPORAL_TASK_QUEUE=capflow-sbx-death-" + strings.ToLower(sig.String())}
			child, main := uniqueSleep(), uniqueSleep()
			sandboxToolAt(t, dir, "long", "", fmt.Sprintf("setsid %s </dev/null >/dev/null 2>&1 &\n%s\n", child, main))
			w := workerAt(t, dir, queue...)
			plan := filepath.Join(dir, "sandbox-worker-death.yaml")
			if err := os.WriteFile(plan, []byte("name: sandbox-worker-death\nsteps:\n  - {id: long, capability: sbx.long, timeout: 10m}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			id := startDetachedAt(t, dir, queue, plan)
			waitStepRunning(t, id, "long")
			for i := 0; i < 100 && !(running(child) && running(main)); i++ {
				time.Sleep(100 * time.Millisecond)
			}
			if !running(child) || !running(main) {
				t.Fatal("the tool's processes never started")
			}
			_ = w.Process.Signal(sig)
			exited := make(chan struct{})
			go func() { _, _ = w.Process.Wait(); close(exited) }()
			select {
			case <-exited:
			case <-time.After(40 * time.Second):
				t.Fatalf("the worker did not exit after %s", sig)
			}
			h.kill(w) // forgets it
			assertGone(t, child)
			assertGone(t, main)
			workerAt(t, dir, queue...)
			// SIGKILL leaves the run waiting for its step (cancelled now,
			// exit 5); a worker stopped by SIGTERM may have told the server
			// its activity ended first, and then the run failed the step,
			// which is not idempotent, itself (exit 1).
			code, env, stderr := h.capflowAt(t, dir, queue, "cancel", id)
			if code != 5 && (sig == syscall.SIGKILL || code != 1) {
				t.Fatalf("cancel: exit %d %s\n%s", code, env.Message, stderr)
			}
		})
	}
}

// Three json.query items that each ask for a gigabyte at once: each is
// stopped in its capped child (RESOURCE_EXHAUSTED), and the worker never
// comes near a gigabyte itself.
func TestBuiltinMemoryStaysOutOfTheWorker(t *testing.T) {
	plan := h.writePlan(t, "builtin-memory", `name: builtin-memory
max_parallel: 3
steps:
  - id: each
    capability: json.query
    for_each: [1, 2, 3]
    with: {query: '("x" * 1000000000) | length', input: "${item}"}
`)
	code, r := h.run(t, plan)
	if code != 1 || r.Status != "failed" {
		t.Fatalf("exit %d status %s", code, r.Status)
	}
	s := r.step(t, "each")
	if s.Envelope == nil || !strings.Contains(fmt.Sprint(s.Envelope.Data, s.Envelope.Message), "RESOURCE_EXHAUSTED") {
		t.Fatalf("each: %s %+v", s.Status, s.Envelope)
	}
	if peak := workerPeakKB(); peak == 0 || peak > 1<<20 {
		t.Fatalf("the worker peaked at %d MiB (want under 1 GiB)", peak>>10)
	}
}
