package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The standing hostile suite of "trust by construction" (docs/sandbox.md,
// docs/console.md, docs/mcp.md, docs/artifacts.md, docs/cache.md): each
// test reproduces a finding of the hostile audit against the real binaries
// and a real Temporal server, and fails if it comes back. The unit suites
// hold the rest (activities, internal/{beneath,console,cli,sandbox,cache,
// mcpclient,config,manifest}: TestHostile*, TestKernelSettings...).

// TestHostileNoWorkerSaysSo: `capflow run` to a task queue no worker
// polls says so within 15 s and keeps waiting; Ctrl-C then exits 5
// (CANCELLED), the run left as it is.
func TestHostileNoWorkerSaysSo(t *testing.T) {
	queue := fmt.Sprintf("nobody-%d", time.Now().UnixNano())
	plan := h.writePlan(t, "no-worker", "name: no-worker\nsteps:\n  - {id: a, capability: text.render, with: {template: hi}}\n")
	cmd := exec.Command(filepath.Join(h.bin, "capflow"), "run", plan, "--task-queue", queue, "--project", h.project, "--output", "json")
	cmd.Env = h.env()
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	said := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var all strings.Builder
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "no worker polls task queue "+queue) {
				said <- sc.Text()
			}
		}
		said <- "ended without a word:\n" + all.String()
	}()
	select {
	case line := <-said:
		if !strings.Contains(line, "capflow-worker --task-queue "+queue) {
			t.Fatalf("%s", line)
		}
		if took := time.Since(start); took > 15*time.Second {
			t.Fatalf("said so after %s", took)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("no word within 20 s of a run nobody takes")
	}
	_ = cmd.Process.Signal(os.Interrupt)
	err = cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 5 {
		t.Fatalf("Ctrl-C while waiting: %v, want exit 5\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), `"code": "CANCELLED"`) && !strings.Contains(out.String(), `"code":"CANCELLED"`) {
		t.Fatalf("envelope: %s", out.String())
	}
}
