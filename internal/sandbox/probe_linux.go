package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// BwrapEnv names the bubblewrap binary to use instead of the one on PATH;
// "none" makes the worker act as on a machine without it.
const BwrapEnv = "CAPFLOW_BWRAP"

// Support is what this machine offers for confinement, probed once.
type Support struct {
	bwrap   string
	exe     string            // this executable: a server's init inside its sandbox
	missing string            // why nothing can be confined ("" = it can)
	cgroups map[string]string // controller -> folder capflow's cgroups go in
	pool    cgroupPool
	nets    netPool // network namespaces made ahead for a root worker's zygote steps
	// zygoteOff says why no zygote forks steps here (nil: they do);
	// zygote is the one without cgroups, started from zygoteThread.
	zygoteOff atomic.Pointer[string]
	// zygoteUp: a zygote has laid out a step here, so a later one's
	// failure is its own (its set's memory full, say), not the machine's:
	// it turns nothing off (a root worker's steps would go to bubblewrap).
	zygoteUp atomic.Bool
	// stepUser: a zygote runs this root worker's steps as StepID.
	stepUser     atomic.Bool
	zygoteMu     sync.Mutex
	zygote       *zygote
	zygoteThread *forker
}

var (
	probeOnce sync.Once
	probed    *Support
)

// Probe reports what this machine offers: whether bubblewrap can create
// its namespaces here (tried once, for real), and which cgroup v1
// controllers the worker may create cgroups under.
func Probe() *Support {
	probeOnce.Do(func() { probed = probe(true) })
	return probed
}

// probe probes; first is the process's first probe, made before it has
// any cgroups (a test's own later probe must not sweep the first's).
func probe(first bool) *Support {
	s := &Support{cgroups: map[string]string{}}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		s.missing = "cannot find this program's own executable: " + err.Error()
		return s
	}
	s.exe = exe
	s.bwrap, s.missing = findBwrap()
	if s.missing == "" {
		s.missing = tryBwrap(s.bwrap)
	}
	if why := zygoteWhyNot(); why != "" {
		s.zygoteOff.Store(&why)
	}
	for _, c := range []string{"memory", "pids", "cpuacct"} {
		if dir := cgroupParent(c); dir != "" {
			s.cgroups[c] = dir
			sweepStale(dir, first)
		}
	}
	return s
}

// Unavailable is a Support that cannot confine, for why: what a machine
// without bubblewrap or user namespaces probes as.
func Unavailable(why string) *Support { return &Support{missing: why, cgroups: map[string]string{}} }

// Missing says why this machine cannot confine a tool ("" when it can).
func (s *Support) Missing() string { return s.missing }

// Controllers lists the cgroup controllers capflow uses here.
func (s *Support) Controllers() []string {
	var out []string
	for _, c := range []string{"memory", "pids", "cpuacct"} {
		if s.cgroups[c] != "" {
			out = append(out, c)
		}
	}
	return out
}

// Summary is one line for the worker's start-up log.
func (s *Support) Summary() string {
	if s.missing != "" {
		return "unconfined: " + s.missing
	}
	way := "steps forked by capflow's zygote, servers under bubblewrap " + s.bwrap
	if s.stepUser.Load() {
		way = "steps forked by capflow's zygote as uid " + strconv.Itoa(StepID) + ", servers under bubblewrap " + s.bwrap + " as root"
	}
	if off := s.zygoteOff.Load(); off != nil {
		way = "bubblewrap " + s.bwrap + " (no zygote: " + *off + ")"
	}
	cg := s.Controllers()
	if len(cg) == 0 {
		return way + "; no cgroups: memory and CPU time are limited per process (rlimits), pids not at all"
	}
	return fmt.Sprintf("%s; cgroup v1 %s", way, strings.Join(cg, ", "))
}

// zygoteWhyNot says why this build or setting has no zygote ("": it may).
func zygoteWhyNot() string {
	if !zygoteBuilt {
		return "built without cgo"
	}
	if os.Getenv(ZygoteEnv) == "off" {
		return ZygoteEnv + "=off"
	}
	return ""
}

// zygotes reports whether steps may be forked by zygotes here.
func (s *Support) zygotes() bool { return s.zygoteOff.Load() == nil }

func findBwrap() (string, string) {
	name := os.Getenv(BwrapEnv)
	switch name {
	case "none":
		return "", BwrapEnv + "=none: bubblewrap is switched off"
	case "":
		name = "bwrap"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", "bubblewrap (bwrap) is not installed (Debian package bubblewrap)"
	}
	return p, ""
}

// tryBwrap runs bubblewrap once with the namespaces a tool gets: a
// kernel without unprivileged user namespaces refuses here, not mid-run.
func tryBwrap(bwrap string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bwrap, "--unshare-all", "--die-with-parent", "--cap-drop", "ALL",
		"--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "/bin/true").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("bubblewrap cannot create its namespaces here (user namespaces off?): %v: %s", err, bytes.TrimSpace(out))
	}
	return ""
}

// cgroupParent is the folder capflow creates a controller's cgroups in:
// "capflow" under the worker's own cgroup, when the worker may create it
// and the controller's files are there ("" otherwise).
func cgroupParent(controller string) string {
	own := ownCgroup(controller)
	if own == "" {
		return ""
	}
	dir := filepath.Join("/sys/fs/cgroup", controller, own, "capflow")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	probe := map[string]string{"memory": "memory.limit_in_bytes", "pids": "pids.max", "cpuacct": "cpuacct.usage"}[controller]
	if _, err := os.Stat(filepath.Join(dir, probe)); err != nil {
		return ""
	}
	// Another user's folder (root made it first): this worker cannot
	// make its cgroups in it.
	if unix.Access(dir, unix.W_OK|unix.X_OK) != nil {
		return ""
	}
	return dir
}

// ownCgroup reads the worker's cgroup v1 path for a controller.
func ownCgroup(controller string) string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == controller {
				return f[2]
			}
		}
	}
	return ""
}

// keepInheritedOut marks every descriptor past stdio close-on-exec, before
// each bubblewrap start. Go opens its own so, but one this process
// inherited open (a supervisor's pipe, a folder a launcher opened) or a C
// library made would pass through bubblewrap to a tool, a way out of its
// view (found attacking: a tool wrote through an inherited folder's
// descriptor); what a tree is given is handed to it on purpose (exec's
// ExtraFiles, placed after this). The zygote's tool closes all others.
func keepInheritedOut() {
	if unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	ents, _ := os.ReadDir("/proc/self/fd") // before Linux 5.11
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
}
