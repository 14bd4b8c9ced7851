package main

import (
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/soak"
)

// Bad command lines are refused before anything starts, naming what to
// give.
func TestUsageError(t *testing.T) {
	full := soak.Config{Runs: 1, Hosts: 3, Faults: 4, Netns: "auto", Commands: soak.Commands{ServerKill: "k", ServerStart: "s", PostgresRestart: "p"},
		RunWait: time.Minute, HostWait: 5 * time.Second, MaxRSSMB: 512}
	afile := filepath.Join(t.TempDir(), "afile")
	_ = os.WriteFile(afile, nil, 0o644)
	used := t.TempDir()
	_ = os.WriteFile(filepath.Join(used, "x"), nil, 0o644)
	cases := []struct {
		name   string
		args   []string
		mod    func(c *soak.Config)
		envErr error
		want   string
	}{
		{"fine", nil, func(*soak.Config) {}, nil, ""},
		{"a stray word", []string{"extra"}, func(*soak.Config) {}, nil, `unexpected "extra"`},
		{"a bad SOAK_RUNS", nil, func(*soak.Config) {}, errors.New("x"), "is not a number of runs"},
		{"a bad SOAK_RUNS, --runs given", []string{"--runs", "2"}, func(*soak.Config) {}, errors.New("x"), ""},
		{"netns", nil, func(c *soak.Config) { c.Netns = "bogus" }, nil, `--netns "bogus"`},
		{"no runs", nil, func(c *soak.Config) { c.Runs = 0 }, nil, "--runs 0: 1 to 10000"},
		{"one host", nil, func(c *soak.Config) { c.Hosts = 1 }, nil, "--hosts 1: 2 to 16"},
		{"negative faults", nil, func(c *soak.Config) { c.Faults = -1 }, nil, "--faults -1: 0 to 10000"},
		// Hostile findings at 6003afe, 24: every flag at fault is named.
		{"every bad flag", nil, func(c *soak.Config) {
			c.Spread, c.RunWait, c.MaxRSSMB, c.HostWait, c.Runs, c.Hosts, c.Work = -10*time.Second, -time.Second, math.NaN(), -time.Second, 9999999999, 100000, afile
		}, nil, "--runs 9999999999: 1 to 10000; --hosts 100000: 2 to 16 (a lost host's runs move to another); --spread -10s: 0 (2s a run) to 24h; --run-wait -1s: more than 0, at most 24h; --host-wait -1s: 1s to 24h (the workers' temporal.host_wait); --max-rss-mb NaN: a number of MB above 0; --work " + afile + " is a file"},
		{"a negative bound", nil, func(c *soak.Config) { c.MaxRSSMB = -5 }, nil, "--max-rss-mb -5"},
		{"no server command", nil, func(c *soak.Config) { c.Commands.ServerStart = "" }, nil, "--server-start is not given"},
		{"no postgres command, 2 faults", nil, func(c *soak.Config) { c.Faults, c.Commands.PostgresRestart = 2, "" }, nil, ""},
		{"no postgres command, 3 faults", nil, func(c *soak.Config) { c.Faults, c.Commands.PostgresRestart = 3, "" }, nil, "--postgres-restart is not given"},
		{"no commands, 1 fault", nil, func(c *soak.Config) { c.Faults, c.Commands = 1, soak.Commands{} }, nil, ""},
		{"a used work folder", nil, func(c *soak.Config) { c.Work = used }, nil, "is not empty"},
	}
	for _, tc := range cases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.Int("runs", 0, "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		c := full
		tc.mod(&c)
		got := usageError(fs, c, tc.envErr)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
