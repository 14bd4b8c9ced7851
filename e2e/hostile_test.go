package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/envelope"
)

// probe runs the capflow binary against project dir as an attacker would,
// optionally sending sig after delay, and checks the answer is one clean
// envelope with no stack trace. It returns the exit code, the envelope,
// stdout+stderr and how long capflow took after the signal.
func probe(t *testing.T, dir string, sig os.Signal, delay time.Duration, args ...string) (int, envelope.Envelope, string, time.Duration) {
	t.Helper()
	cmd := exec.Command(filepath.Join(h.bin, "capflow"), append(args, "--project", dir, "--output", "json")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CAPFLOW_TEMPORAL_ADDRESS="+h.address, "HOSTILE_TOKEN=987654321987")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var signalled time.Time
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	if sig != nil {
		select {
		case err = <-done:
			t.Fatalf("capflow %v ended before the signal: %v\n%s%s", args, err, out.String(), errb.String())
		case <-time.After(delay):
		}
		signalled = time.Now()
		_ = cmd.Process.Signal(sig)
	}
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("capflow %v hung", args)
	}
	took := time.Duration(0)
	if sig != nil {
		took = time.Since(signalled)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && out.Len() == 0 && delay < 5*time.Second {
			// The signal came before the process reached main (a loaded
			// machine: Go's package init runs first), so the OS default
			// ended it, not capflow: probe again, later.
			t.Logf("capflow %v was not running yet after %s; probing again", args, delay)
			return probe(t, dir, sig, 3*delay, args...)
		}
	}
	var env envelope.Envelope
	dec := json.NewDecoder(bytes.NewReader(out.Bytes()))
	if err := dec.Decode(&env); err != nil || dec.More() {
		t.Fatalf("capflow %v: stdout is not exactly one envelope (%v)\n%s\n%s", args, err, out.String(), errb.String())
	}
	if errs := envelope.Validate(&env); len(errs) > 0 {
		t.Fatalf("capflow %v: invalid envelope %v", args, errs)
	}
	all := out.String() + errb.String()
	if strings.Contains(all, "goroutine ") || strings.Contains(all, "panic:") {
		t.Fatalf("capflow %v printed a stack trace:\n%s", args, all)
	}
	return code, env, all, took
}

func hostileDir(t *testing.T) (string, string) {
	t.Helper()
	dir, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOP-SECRET-CONTENT"), 0o600)
	os.Symlink(outside, filepath.Join(dir, "linkdir"))
	os.Symlink("/dev/zero", filepath.Join(dir, "z"))
	return dir, outside
}

func TestHostileContainment(t *testing.T) {
	dir, outside := hostileDir(t)
	for _, args := range [][]string{
		{"tools", "run", "file.read", "--input", "path=linkdir/secret.txt"},
		{"tools", "run", "file.write", "--input", "path=linkdir/planted.txt", "--input", "content=x"},
		{"tools", "run", "file.checksum", "--input", "path=z"},
		{"tools", "run", "archive.create", "--input", "source=linkdir", "--input", "output=out.zip"},
	} {
		code, env, all, _ := probe(t, dir, nil, 0, args...)
		if code != 2 || env.Error == nil || env.Error.Code != "INVALID_INPUT" || strings.Contains(all, "TOP-SECRET") {
			t.Errorf("%v: exit %d %+v\n%s", args, code, env.Error, all)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Fatalf("something was written outside the project: %v", entries)
	}
}

// capflow answers SIGINT and SIGTERM within 2 s with a CANCELLED envelope
// (exit 5), whatever the tool is doing: a builtin reading forever, a
// command tool that ignores SIGTERM and leaves a setsid child.
func TestHostileSignals(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	f, _ := os.Create(big)
	f.Truncate(200 << 30) // sparse: hashing it takes minutes
	f.Close()
	tool := filepath.Join(dir, "tools", "stubborn")
	os.MkdirAll(tool, 0o755)
	os.WriteFile(filepath.Join(tool, "tool.yaml"), []byte("name: stubborn\nversion: 1.0.0\ndescription: ignores SIGTERM\ncapabilities: [test.stubborn]\nentrypoint: {type: command, command: [./run.sh]}\n"), 0o644)
	os.WriteFile(filepath.Join(tool, "run.sh"), []byte("#!/bin/sh\ntrap '' TERM\nsetsid sleep 60 &\nsleep 60\n"), 0o755)
	for _, c := range []struct {
		sig  syscall.Signal
		args []string
	}{
		{syscall.SIGTERM, []string{"tools", "run", "file.checksum", "--input", "path=big"}},
		{syscall.SIGINT, []string{"tools", "run", "file.checksum", "--input", "path=big"}},
		{syscall.SIGTERM, []string{"tools", "run", "stubborn"}},
	} {
		code, env, all, took := probe(t, dir, c.sig, 700*time.Millisecond, c.args...)
		if code != 5 || env.Error == nil || env.Error.Code != "CANCELLED" || took > 2*time.Second {
			t.Errorf("%v %v: exit %d after %s, error %+v\n%s", c.sig, c.args, code, took, env.Error, all)
		}
	}
}

func TestHostileFiles(t *testing.T) {
	dir := t.TempDir()
	var bomb strings.Builder
	bomb.WriteString("name: bomb\nsteps: []\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 10; i++ {
		p := fmt.Sprintf("*a%d", i-1)
		fmt.Fprintf(&bomb, "a%d: &a%d [%s]\n", i, i, strings.Repeat(p+", ", 9)+p)
	}
	os.WriteFile(filepath.Join(dir, "bomb.yaml"), []byte(bomb.String()), 0o644)
	os.WriteFile(filepath.Join(dir, "deep.yaml"), []byte(strings.Repeat("[", 50000)), 0o644)
	os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml"))
	syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o600)
	for _, c := range []struct{ file, want string }{
		{"bomb.yaml", "aliases expand the document by more than"}, {"deep.yaml", "nesting deeper than"},
		{"zero.yaml", "not a regular file"}, {"fifo.yaml", "not a regular file"},
	} {
		code, env, all, _ := probe(t, dir, nil, 0, "plan", "check", c.file)
		if code != 2 || !strings.Contains(all, c.want) || !strings.Contains(all, c.file) {
			t.Errorf("%s: exit %d, want 2 naming the file and %q\n%s", c.file, code, c.want, all)
		}
		_ = env
	}
	// A FIFO as a tool.yaml: tools validate answers instead of blocking.
	os.MkdirAll(filepath.Join(dir, "tools", "fifo"), 0o755)
	syscall.Mkfifo(filepath.Join(dir, "tools", "fifo", "tool.yaml"), 0o600)
	if code, _, all, _ := probe(t, dir, nil, 0, "tools", "validate"); code != 2 || !strings.Contains(all, "not a regular file") {
		t.Errorf("FIFO tool.yaml: exit %d\n%s", code, all)
	}
	// capflow.yaml pointing state at / is refused before anything is written.
	cfgDir := t.TempDir()
	os.WriteFile(filepath.Join(cfgDir, "capflow.yaml"), []byte("state_dir: /\n"), 0o644)
	os.WriteFile(filepath.Join(cfgDir, "p.yaml"), []byte("name: p\nsteps: [{id: a, capability: file.read, with: {path: x}}]\n"), 0o644)
	if code, _, all, _ := probe(t, cfgDir, nil, 0, "plan", "check", "p.yaml"); code != 2 || !strings.Contains(all, "state_dir") {
		t.Errorf("state_dir: /: exit %d\n%s", code, all)
	}
	if _, err := os.Stat("/registry-cache.json"); err == nil {
		t.Error("/registry-cache.json exists")
	}
	// A plan of 40,000 steps is refused by max_steps before it is
	// resolved; one of 60,000 before it is even parsed (too many values).
	for _, c := range []struct {
		steps, code int
		want        string
	}{{40000, 4, "40000 steps"}, {60000, 2, "more than 1000000 tokens"}} {
		var big strings.Builder
		big.WriteString("name: huge\nsteps:\n")
		for i := 0; i < c.steps; i++ {
			fmt.Fprintf(&big, "  - {id: s%d, capability: file.checksum, with: {path: x}}\n", i)
		}
		os.WriteFile(filepath.Join(dir, "huge.yaml"), []byte(big.String()), 0o644)
		start := time.Now()
		if code, _, all, _ := probe(t, dir, nil, 0, "plan", "check", "huge.yaml"); code != c.code || !strings.Contains(all, c.want) {
			t.Errorf("%d-step plan: exit %d, want %d %q\n%.300s", c.steps, code, c.code, c.want, all)
		}
		t.Logf("%d-step plan refused in %s", c.steps, time.Since(start).Round(time.Millisecond))
	}
}

func TestHostileCommandLines(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		id   string
	}{
		{[]string{"frobnicate"}, 2, "capflow"},
		{[]string{"plan"}, 2, "capflow-plan"},
		{[]string{"plan", "check", "missing.yaml"}, 2, "capflow-plan-check"},
		{[]string{"route", "convert all .webm in ../../outside/ to mp4"}, 2, "capflow-route"},
	} {
		code, env, all, _ := probe(t, dir, nil, 0, c.args...)
		if code != c.code || env.ToolID != c.id {
			t.Errorf("%v: exit %d toolId %s, want %d %s\n%s", c.args, code, env.ToolID, c.code, c.id, all)
		}
		if c.args[0] == "route" && (env.Error == nil || env.Error.Code != "INVALID_INPUT") {
			t.Errorf("route outside the project must blame the request: %+v", env.Error)
		}
	}
}
