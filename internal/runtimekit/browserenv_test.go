package runtimekit

import (
	"os"
	"os/exec"
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
