package runtimekit

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// Chromium starts with browserEnv alone, however chromedp fills the
// command's environment after capflow's hook (the worker's whole one,
// then its own): a worker's secret is not the browser's.
func TestTheBrowserGetsNoneOfTheWorkersEnvironment(t *testing.T) {
	t.Setenv("CAPFLOW_TEST_WORKER_SECRET", "s3cret")
	t.Setenv("LANG", "C.UTF-8")
	tmp := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", "env")
	cleanBrowserEnv(tmp)(cmd)
	if cmd.SysProcAttr == nil || cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL {
		t.Fatal("the browser would outlive a killed worker (chromedp's Pdeathsig is the hook's to set)")
	}
	cmd.Env = append(os.Environ(), "TMPDIR=/elsewhere") // as chromedp does after the hook
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(out))
	for _, want := range []string{"HOME=" + tmp, "TMPDIR=" + tmp, "LANG=C.UTF-8", "PATH=" + browserPath} {
		if !slices.Contains(got, want) {
			t.Errorf("the browser's environment lacks %s: %q", want, got)
		}
	}
	for _, v := range got {
		if k, _, _ := strings.Cut(v, "="); !slices.Contains(append(browserEnvKeys, "PATH", "HOME", "TMPDIR", "PWD", "SHLVL", "_"), k) {
			t.Errorf("the browser got the worker's %s", v)
		}
	}
}

// A browser whose path holds "=" starts, with its arguments, and still
// without the worker's environment (env alone would read the path as a
// variable and run the first argument instead).
func TestABrowserInAFolderWithAnEqualsSign(t *testing.T) {
	t.Setenv("CAPFLOW_TEST_WORKER_SECRET", "s3cret")
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "opt=chromium", "chrome")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"args: $*\"\nenv\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless", "--user-data-dir=/x")
	cleanBrowserEnv(tmp)(cmd)
	cmd.Env = os.Environ()
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "args: --headless --user-data-dir=/x\n") || strings.Contains(string(out), "s3cret") ||
		!strings.Contains(string(out), "HOME="+tmp) {
		t.Fatalf("%v\n%s", err, out)
	}
}
