// Package sandbox confines the process tree of a command tool or a
// runtime-kit server (docs/sandbox.md): Linux namespaces through
// bubblewrap (its own PID namespace, a read-only view of the file system
// with the step folder writable, no network but its own loopback), cgroup
// v1 limits on the whole tree where the worker may create cgroups (memory,
// pids, CPU time), and rlimits (file size; per-process memory and CPU time
// where no cgroup is available). capflow checks no paths itself: the
// kernel refuses what the tool may not do.
package sandbox

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/capflow/capflow/internal/policy"
)

// Mode is the policy's `sandbox:` setting (policy.SandboxMode).
type Mode = policy.SandboxMode

// The modes (policy.SandboxDefault...).
const (
	ModeDefault  = policy.SandboxDefault
	ModeRequired = policy.SandboxRequired
	ModeOff      = policy.SandboxOff
)

// Spec is what one tool may use: the manifest's `sandbox:` block over
// Defaults, with paths made absolute.
type Spec struct {
	// Network true gives the tree the network through capflow's egress
	// proxy (Request.Outbound); false leaves it its own loopback only.
	// Either way it has its own network namespace.
	Network bool
	// Read and Write are absolute paths beyond the defaults (the project
	// read-only; the step folder, or a server's run folder, writable).
	Read, Write []string
	Memory      int64         // bytes, of the whole tree
	Pids        int           // processes and threads of the whole tree
	CPU         time.Duration // CPU time of the whole tree
	FileSize    int64         // bytes, of any one file written
}

// Defaults are the limits of a tool whose manifest declares none.
var Defaults = Spec{Memory: 1 << 30, Pids: 256, CPU: 10 * time.Minute, FileSize: 1 << 30}

// StepID is the user and group a root worker's zygote steps run as, an
// id nothing else on a host uses (docs/sandbox.md#the-zygote; STEP_ID in
// zygote_linux.h).
const StepID = 2080374784

// Request is one process tree to confine.
type Request struct {
	Argv []string
	Dir  string
	Env  []string
	// Read are folders the tree reads beyond the system (the project, the
	// tool's folder); Write the ones it writes (the step folder). Hide are
	// files or folders it must not see at all (the worker's keys).
	Read, Write, Hide []string
	// Own are the folders of Read the run was given as its own (the
	// project, its run folder, the folder holding the tool's): a root worker's step,
	// which runs as StepID, sees their owner as itself, as it does its
	// Write folders; the rest of Read (input files named by path, a
	// manifest's read:, the PATH folders in a home) it reads as any user.
	Own []string
	// Given are the files the step's inputs name, each opened once where
	// it was (OpenGiven): bound by that handle, never by its name again,
	// where the sandbox hides them. A root worker's step reads them, and
	// its manifest's read:, only where the step user could reach them on
	// the machine itself (the zygote looks them up by that user's rights).
	Given GivenFiles
	// Private are folders of the project the tree sees empty but for what
	// it reads in them: the runs folder (other runs' inputs and results)
	// and the engine's state.
	Private []string
	Spec    Spec
	// Server: the tree outlives the process that started it (no
	// die-with-parent) and lives as long as any of its processes does.
	Server bool
	// Outbound serves the proxy of a tree with the network: every
	// connection it makes goes through it (nil: none is allowed).
	Outbound http.Handler
	// Mirror are loopback ports the tree finds on its own loopback, each
	// relayed by Relay to the same port of the host's (ports its run was
	// given: HTTP clients that skip proxies for loopback reach them too).
	Mirror []uint16
	Relay  func(port uint16) (net.Conn, error)
	// Folders are the write folders held open (SpecFor): each is bound
	// from its handle, never by its name again.
	Folders Folders

	bindFDs map[string]int // Folders' and Given's descriptors in the tree (bubblewrap's, the zygote's request), by path
	netns   int            // the index among the zygote's files of a network namespace made for the tree (0: none)
	ctl     int            // the index among the zygote's files of the tree's control socket (0: none)
	// asStepUser: a root worker's zygote step, which runs as StepID: Own
	// folders are bound wherever they are, and they and the Write folders
	// are bound as its own (zygote_ids_linux.c).
	asStepUser bool
	// zygoteWait makes Start wait for a zygote that is starting (tests of
	// the zygote's way) rather than take bubblewrap.
	zygoteWait bool
}

// Breach is a limit a tree passed.
type Breach struct {
	Limit string // memory, pids, cpu or file_size
	Max   string // the limit, as a person reads it
	Seen  string // what was reached
}

func (b *Breach) Error() string {
	if b.Seen == "" {
		return fmt.Sprintf("passed its %s limit (%s)", b.Limit, b.Max)
	}
	return fmt.Sprintf("passed its %s limit (%s; reached %s)", b.Limit, b.Max, b.Seen)
}

// Bytes prints a size the way manifests write it (1GiB, 256MiB, 4096).
func Bytes(n int64) string {
	for _, u := range []struct {
		s string
		n int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.n && n%u.n == 0 {
			return fmt.Sprintf("%d%s", n/u.n, u.s)
		}
		if n >= u.n {
			return fmt.Sprintf("%.1f%s", float64(n)/float64(u.n), u.s)
		}
	}
	return fmt.Sprintf("%dB", n)
}

// Describe is a one-line summary of what a spec allows, for `tools show`
// and `plan check`.
func (s Spec) Describe() string {
	net := "own loopback only"
	if s.Network {
		net = "through capflow's egress proxy"
	}
	parts := []string{"network: " + net}
	if len(s.Write) > 0 {
		parts = append(parts, "also writes "+strings.Join(s.Write, ", "))
	}
	if len(s.Read) > 0 {
		parts = append(parts, "also reads "+strings.Join(s.Read, ", "))
	}
	cpu := "cpu " + s.CPU.String()
	if s.CPU == 0 {
		cpu = "cpu unlimited"
	}
	parts = append(parts, fmt.Sprintf("memory %s, pids %d, %s, file_size %s", Bytes(s.Memory), s.Pids, cpu, Bytes(s.FileSize)))
	return strings.Join(parts, "; ")
}
