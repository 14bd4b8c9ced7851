package runtimekit

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// browserEnvKeys are what Chromium takes of the worker's environment:
// how to write text. The worker's other variables (its API keys, tokens,
// the Temporal address) are not the browser's: a run reaches only what it
// was given.
var browserEnvKeys = []string{"LANG", "LC_ALL", "TZ"}

// browserPath is Chromium's PATH: the system's folders, not the worker's
// (Debian's chromium is a script that runs grep, tr and others by name,
// and a worker's PATH may list folders its user can write first).
const browserPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// browserEnv is Chromium's whole environment: the keys above, the
// system's PATH, and home and temporary files in the browser's own folder
// (removed with it), not the worker's home.
func browserEnv(tmp string) []string {
	env := []string{"PATH=" + browserPath, "HOME=" + tmp, "TMPDIR=" + tmp}
	for _, k := range browserEnvKeys {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// cleanBrowserEnv makes cmd start Chromium through env -i with
// browserEnv(tmp) alone. chromedp gives the browser the worker's whole
// environment and lets no option take it away (it prepends os.Environ to
// any it is given); env -i drops it before Chromium starts, in the same
// process, so chromedp still holds Chromium's PID. A hook replaces
// chromedp's own, which kills Chromium with the worker (Pdeathsig): set
// here as there, or a killed worker left Chromium running under PID 1.
func cleanBrowserEnv(tmp string) func(*exec.Cmd) {
	return func(cmd *exec.Cmd) {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		envBin := "/usr/bin/env" // not looked up on PATH first: the system's
		if _, err := os.Stat(envBin); err != nil {
			envBin, _ = exec.LookPath("env")
		}
		args := append([]string{"env", "-i"}, browserEnv(tmp)...)
		if strings.Contains(cmd.Path, "=") {
			// env reads every word with "=" before the command as a
			// variable: a browser in such a folder starts through the
			// system's shell, which takes its name as an argument.
			args = append(args, "/bin/sh", "-c", `exec "$0" "$@"`)
		}
		cmd.Args = append(append(args, cmd.Path), cmd.Args[1:]...)
		cmd.Path = envBin
	}
}
