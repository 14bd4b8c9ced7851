package runtimekit

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/capflow/capflow/internal/procfs"
	"github.com/capflow/capflow/internal/seal"
)

// OwnerEnv carries a server's ownership token in its environment. The
// token is also in the run's record, but a record is only a file: what
// proves that a process is the run's is that the kernel shows the token
// in the environment the process was started with, which nobody can add
// to a process someone else started. A forged or copied processes.json
// therefore never gets another process signalled.
const OwnerEnv = "CAPFLOW_OWNER_TOKEN"

// runKey is a run folder's part of its tokens: a token copied from
// another run's record does not match this run.
func runKey(runDir string) string {
	h := sha256.Sum256([]byte("capflow-run\x00" + runDir))
	return hex.EncodeToString(h[:8])
}

// newToken is a fresh token of the run at runDir.
func newToken(runDir string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return runKey(runDir) + "-" + hex.EncodeToString(b)
}

// environToken reads pid's ownership token from the environment the
// kernel recorded when it started ("" when it has none).
func environToken(pid int) (string, error) { return procfs.Env(pid, OwnerEnv) }

// checkToken says why pid does not carry the record's token of this run,
// or "" when it does.
func (r Record) checkToken(runDir string) string {
	switch {
	case r.Token == "":
		return fmt.Sprintf("the record of pid %d has no ownership token (recorded by an older capflow, or edited)", r.PID)
	case !strings.HasPrefix(r.Token, runKey(runDir)+"-"):
		return fmt.Sprintf("the record of pid %d carries another run's token (processes.json edited?)", r.PID)
	}
	tok, err := environToken(r.PID)
	if err != nil {
		return fmt.Sprintf("the environment of pid %d cannot be read: %v", r.PID, err)
	}
	if tok != r.Token {
		return fmt.Sprintf("pid %d does not carry the run's ownership token: it is not a process this run started", r.PID)
	}
	return ""
}

// Sweep stops every process group led by a process that carries one of
// the run's tokens, found through /proc: how a run's servers are stopped
// when its processes.json cannot be read. It returns their pids.
func Sweep(runDir string, grace time.Duration) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	prefix := runKey(runDir) + "-"
	own := syscall.Getpgrp()
	ns, _ := os.Readlink("/proc/self/ns/pid")
	groups := map[int]int{} // process group -> a token carrier in it
	var order []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == os.Getpid() {
			continue
		}
		tok, err := environToken(pid)
		if err != nil || !strings.HasPrefix(tok, prefix) {
			continue
		}
		// A process inside a confined server's PID namespace goes with
		// its sandbox, whose bubblewrap (here) carries the token too.
		if its, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); ns != "" && its != ns {
			continue
		}
		// By group, the leader's own first: members whose leader died
		// (or left) are stopped with their group too.
		pgid, err := syscall.Getpgid(pid)
		if err != nil || pgid <= 1 || pgid == own {
			continue
		}
		if _, seen := groups[pgid]; !seen {
			order = append(order, pgid)
		}
		if _, seen := groups[pgid]; !seen || pid == pgid {
			groups[pgid] = pid
		}
	}
	var stopped []int
	for _, pgid := range order {
		terminate(pgid, groups[pgid], grace)
		stopped = append(stopped, groups[pgid])
	}
	return stopped
}

// OwnerKeyFile names the file of the key that seals ownership records
// (internal/seal): outside every project, so a tool that can write a
// run's processes.json still cannot seal a record.
const OwnerKeyFile = seal.KeyFile

// EnsureOwnerKey makes the key now if it is not there yet: a confined
// tool's sandbox hides it only if it exists when the sandbox is made.
func EnsureOwnerKey() { seal.Ensure() }

// OwnerKeyPath is the key's file ("" when there is no configuration
// folder): confined tools never see it.
func OwnerKeyPath() string { return seal.KeyPath() }

// sealOf is a record's seal: an HMAC of what binds it to its process and
// run, with the key ("" when there is no key to use).
func sealOf(runDir string, r Record) string {
	return seal.Of("capflow-seal", fmt.Appendf(nil, "%s\x00%d\x00%d\x00%s\x00%s\x00%s", runDir, r.PID, r.StartTicks, strings.Join(r.Argv, "\x00"), r.Cwd, r.Token))
}

// sealed reports whether r carries the seal only this host's key makes:
// the proof that stands when a server rewrote its environment (nginx and
// setproctitle overwrite it) and the token can no longer be read there.
func (r Record) sealed(runDir string) bool {
	want := sealOf(runDir, r)
	return r.Seal != "" && want != "" && hmac.Equal([]byte(r.Seal), []byte(want))
}
