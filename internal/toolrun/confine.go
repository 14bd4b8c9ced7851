package toolrun

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/kitcache"

	// Also registers the runtime kit's builtins wherever tools run.
	"github.com/capflow/capflow/internal/realpath"
	"github.com/capflow/capflow/internal/runtimekit"
	"github.com/capflow/capflow/internal/sandbox"
	"golang.org/x/sys/unix"
)

// maxInputPaths bounds the input paths a confined tool is given to read.
const maxInputPaths = 32 // with stdio and write folders, within a zygote request's 64 descriptors

// confine decides how a command tool runs (docs/sandbox.md): in a
// sandbox (box set), or unconfined because the policy says off or, with
// the default policy, because the machine cannot confine (warning set).
// An error is the step's CONFIG_ERROR.
func (r *Runner) confine(req Request, p *process) (warning string, err error) {
	if req.Sandbox == sandbox.ModeOff {
		return "", nil
	}
	sup := r.Support
	if sup == nil {
		sup = sandbox.Probe()
	}
	if why := sup.Missing(); why != "" {
		if req.Sandbox == sandbox.ModeRequired {
			return "", caperr.New(caperr.ConfigError, "the policy says sandbox: required, but this machine cannot confine %s: %s", req.Manifest.Name, why)
		}
		return fmt.Sprintf("ran unconfined (policy sandbox: default): %s", why), nil
	}
	runtimekit.EnsureOwnerKey()
	folders := req.Folders
	if folders == nil {
		if folders, err = sandbox.OpenWrites(req.Manifest.Sandbox, req.Root, r.Protected...); err != nil {
			return "", caperr.New(caperr.ConfigError, "%s: %v", req.Manifest.File, err)
		}
		p.folders = folders // closed when the process has ended
	}
	spec := sandbox.SpecWith(req.Manifest.Sandbox, realpath.Of(req.Root), folders) // read: paths where they really are
	// The folder holding the tool's folder (its kit, the project's tools
	// folder): tools share code beside them (kits/media/lib).
	root, runDir, toolsDir := realpath.Of(req.Root), realpath.Of(req.RunDir), ""
	if req.Manifest.Dir != "" {
		toolsDir = realpath.Of(filepath.Dir(req.Manifest.Dir))
	}
	read := nonEmpty([]string{root, runDir, toolsDir})
	own := ownFolders(root, runDir, toolsDir)
	p.support = sup
	hide := append(nonEmpty([]string{runtimekit.OwnerKeyPath()}), r.Hide...)
	p.given = r.givenFiles(req, nonEmpty([]string{root, runDir}), hide)
	p.box = &sandbox.Request{Argv: p.argv, Dir: p.dir, Env: sandboxEnv(p.env), Read: nonEmpty(read), Own: own, Given: p.given,
		Write: []string{p.workdir}, Hide: hide, Spec: spec, Folders: folders,
		Private: r.Private}
	if spec.Network {
		p.box.Mirror, p.box.Relay = req.Net.LoopbackPorts(), builtin.Relay(req.Net)
		p.box.Outbound = builtin.Outbound(req.Net, req.RunID+"/"+req.Label, func(err error) {
			r.logger().Warn("egress refused", "step", req.Label, "why", err)
			p.refused(err)
		})
	}
	return "", nil
}

// ownFolders are what a root worker's step gets as its own
// (sandbox.Request.Own): the project, the run's folder, and the folder
// holding the tool's only where it lies in the project or capflow's kit
// cache. A tools folder linked or configured elsewhere (`tools -> ..`,
// tools_dirs: [/var]) would make what lies there, other projects' and the
// machine's root-only files, the step's (found attacking issue 57): it is
// bound as it is.
func ownFolders(root, runDir, toolsDir string) []string {
	own := nonEmpty([]string{root, runDir})
	homes := nonEmpty([]string{root})
	if kits, err := kitcache.Root(); err == nil {
		homes = append(homes, realpath.Of(kits))
	}
	if _, _, in := beneath.Pick(homes, toolsDir); in {
		own = append(own, toolsDir)
	}
	return own
}

// sandboxEnv points TMPDIR at the sandbox's own /tmp: the worker's may
// not exist in there.
func sandboxEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "TMPDIR=") {
			out = append(out, kv)
		}
	}
	return append(out, "TMPDIR=/tmp")
}

// givenFiles are the files the step's inputs name that its tool may read
// where the sandbox hides them (the machine's /tmp), each opened once
// where it was, and bound by that handle (sandbox.Request.Given): a name
// checked here and bound later could lead elsewhere by then (found
// attacking: a folder swapped for a link between the two). Only files:
// never a socket, a FIFO or a device, nor a folder, which shows whatever
// its owner makes in it later (found attacking: an ssh-agent's socket, a
// tmux server's); never in a home or the host's sockets (/root, /home,
// the worker's $HOME, /run), another run's folder or the engine's state
// (Private: found attacking issue 53), nor one the sandbox hides (hide:
// the ownership key, by what it is, so no link or hard link to it
// either; found attacking); none in the project or the run's folder
// (own), which the step reads already.
func (r *Runner) givenFiles(req Request, own, hide []string) sandbox.GivenFiles {
	home, _ := os.UserHomeDir()
	closed := nonEmpty(append([]string{"/root", "/home", "/run", "/var/run", home}, r.Private...))
	for _, c := range closed {
		closed = append(closed, realpath.Of(c)) // compared with where each file really is (found attacking)
	}
	var out sandbox.GivenFiles
	for _, p := range inputPaths(req.Inputs, maxInputPaths) {
		// Never through a /proc link: into another process's file system.
		fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_MAGICLINKS})
		if err != nil {
			continue
		}
		f := os.NewFile(uintptr(fd), p)
		st, err := f.Stat()
		real, lerr := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
		_, _, mine := beneath.Pick(own, real)
		_, _, shut := beneath.Pick(closed, real)
		if err != nil || lerr != nil || !st.Mode().IsRegular() || !filepath.IsAbs(real) || mine || shut || hidden(st, hide) {
			f.Close()
			continue
		}
		out = append(out, sandbox.Given{Real: real, File: f})
	}
	return out
}

// hidden reports whether st is one of the files at paths.
func hidden(st os.FileInfo, paths []string) bool {
	for _, p := range paths {
		if h, err := os.Stat(p); err == nil && os.SameFile(st, h) {
			return true
		}
	}
	return false
}

// inputPaths are the absolute paths among the inputs' strings: a tool
// reads what its step was given even where the sandbox hides the rest
// (/tmp; givenFiles).
func inputPaths(v any, max int) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		if len(out) >= max {
			return
		}
		switch x := v.(type) {
		case string:
			if filepath.IsAbs(x) && len(x) < 4096 {
				if _, err := os.Stat(x); err == nil {
					out = append(out, filepath.Clean(x))
				}
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

func nonEmpty(xs []string) []string {
	out := xs[:0]
	for _, x := range xs {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

// unconfinedNote is the warning a step run unconfined carries.
func unconfinedNote(why string) envelope.Feedback {
	return envelope.Feedback{Phase: "sandbox", Level: envelope.LevelWarning, Message: why, Timestamp: envelope.Timestamp(envelope.Now())}
}
