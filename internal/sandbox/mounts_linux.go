package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// hiddenRoots are the folders a confined tool does not see: /tmp (a
// private one instead), /run and /var/run (the host's sockets: Docker,
// D-Bus, databases; a read-only bind does not stop a connect), and the
// homes (/root, /home, the worker's $HOME: keys, credentials, agents'
// sockets, capflow's ownership key). Each where it really is: /var/run
// is usually a link to /run, and a home may be one too (/root to
// /var/roothome on Fedora's image-based systems; found attacking: the
// home a link led to stayed in view).
func hiddenRoots() []string {
	var out []string
	for _, p := range []string{"/tmp", "/run", "/var/run", "/root", "/home", os.Getenv("HOME")} {
		if !filepath.IsAbs(p) {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil || real == "/" || covered(real, out) {
			continue
		}
		if st, err := os.Stat(real); err == nil && st.IsDir() {
			out = append(out, real)
		}
	}
	return out
}

// within reports whether p is root or lies under it.
func within(p, root string) bool {
	return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/")
}

// covered reports whether p lies in one of roots.
func covered(p string, roots []string) bool {
	for _, r := range roots {
		if within(p, r) {
			return true
		}
	}
	return false
}

// mountArgs lays out the tree's file system over the read-only root: the
// hidden roots replaced by empty tmpfs, what the tool reads from them
// bound back read-only, its write folders bound writable, and the Hide
// paths covered last, so no bind above uncovers them.
func (s *Support) mountArgs(req Request) []string {
	hidden := hiddenRoots()
	var a []string
	for _, h := range hidden {
		a = append(a, "--tmpfs", h)
	}
	read := append(append(append([]string(nil), req.Read...), toolchains(workersOwn(pathDirs(req.Env)))...), req.Spec.Read...)
	if req.Server || req.Spec.Network {
		read = append(read, s.exe) // the init below
	}
	private := existingDirs(req.Private)
	own := ownershipOf(req, hidden, private)
	shown := own.rebind(rebind(read, hidden))
	for _, p := range shown {
		a = append(a, own.kind("--ro-bind-try", p, false), p, p)
	}
	// The project's private folders (other runs, the engine's state)
	// emptied in turn, and what the tree reads in them (its own run's
	// folder) bound back.
	for _, d := range private {
		a = append(a, "--tmpfs", d)
	}
	for _, p := range rebind(read, private) {
		a = append(a, own.kind("--ro-bind-try", p, true), p, p)
		shown = append(shown, p)
	}
	// The files the inputs name, by the handles taken where they were:
	// each one handed over (handOver), and shown, so a Hide path among
	// them is covered again (found attacking: an input uncovered the
	// ownership key).
	for _, g := range req.Given {
		if fd, ok := req.bindFDs[g.Real]; ok {
			a = append(a, own.kind("--ro-bind-fd", g.Real, false), strconv.Itoa(fd), g.Real)
			shown = append(shown, g.Real)
		}
	}
	bound := map[string]bool{}
	for _, p := range append(append([]string(nil), req.Write...), req.Spec.Write...) {
		if bound[p] {
			continue
		}
		bound[p] = true
		if fd, ok := req.bindFDs[p]; ok {
			a = append(a, own.kind("--bind-fd", p, false), strconv.Itoa(fd), p)
		} else {
			a = append(a, own.kind("--bind", p, false), p, p)
		}
		shown = append(shown, filepath.Clean(p))
	}
	views := viewsOf(shown)
	for _, p := range req.Hide {
		a = append(a, covers(p, hidden, views)...)
	}
	return a
}

// view is a bind the tree sees: its name, and where it really is.
type view struct{ name, real string }

func viewsOf(shown []string) []view {
	out := make([]view, len(shown))
	for i, s := range shown {
		out[i] = view{name: s, real: s}
		if r, err := filepath.EvalSymlinks(s); err == nil {
			out[i].real = r
		}
	}
	return out
}

// covers hide p wherever the tree would see it, compared where each
// thing really is: beneath every bind that shows it, by that bind's name
// (through any link to its folder: found attacking, a read: of ~/cfg, a
// link to ~/.config, showed the key), a bind made inside it covered whole
// (found attacking: a read: of ~/.ssh/sub showed a hidden ~/.ssh), and
// where it really is when that is not hidden anyway. Never by a name that
// runs through a link into a hidden folder: it shows nothing there, and
// bubblewrap cannot mount through it (found attacking).
func covers(p string, hidden []string, views []view) []string {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil // not there
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil
	}
	type place struct {
		at  string
		dir bool
	}
	var at []place
	if !covered(real, hidden) {
		at = append(at, place{real, st.IsDir()})
	}
	for _, v := range views {
		switch {
		case within(real, v.real):
			rel, _ := filepath.Rel(v.real, real)
			at = append(at, place{filepath.Join(v.name, rel), st.IsDir()})
		case within(v.real, real):
			inner, err := os.Stat(v.real)
			at = append(at, place{v.name, err == nil && inner.IsDir()})
		}
	}
	var a []string
	seen := map[string]bool{}
	for _, c := range at {
		if seen[c.at] {
			continue
		}
		seen[c.at] = true
		if c.dir {
			a = append(a, "--tmpfs", c.at)
		} else {
			a = append(a, "--ro-bind", "/dev/null", c.at)
		}
	}
	return a
}

// ownershipOf is what req's tree gets as its own: a root worker's zygote
// step, which runs as the step user, its Own folders wherever they are.
func ownershipOf(req Request, hidden, private []string) ownership {
	o := ownership{on: req.asStepUser}
	if !o.on {
		return o
	}
	o.named = map[string]bool{}
	for _, p := range req.Spec.Read {
		o.named[filepath.Clean(p)] = true
	}
	for _, g := range req.Given {
		o.named[g.Real] = true
	}
	o.all = rebind(req.Own, append(slices.Clone(hidden), "/"))
	for _, p := range req.Own {
		if covered(filepath.Clean(p), private) {
			o.private = append(o.private, filepath.Clean(p))
		}
	}
	return o
}

// rebind adds the Own folders to what is bound back: after the rest,
// each its own bind (one inside a folder bound as it is, such as an
// input's, is still the step's own), and none of the rest inside one.
func (o ownership) rebind(shown []string) []string {
	if !o.on {
		return shown
	}
	rest := slices.DeleteFunc(slices.Clone(shown), func(p string) bool { return covered(p, o.all) })
	return append(rest, o.all...)
}

// ownership marks the binds a root worker's step gets as its own (its
// kind + "-own": the zygote binds them idmapped, zygote_ids_linux.c): every
// write folder, and what the Own folders (all) hold, but in a private
// folder only what an Own folder there holds (the run's own folder, not
// the engine's state that a manifest's read: names). What else the step
// names (its inputs, its manifest's read:) is marked "-named": the zygote
// finds it by the step user's own rights (zygote_linux.c clone_as_user).
type ownership struct {
	on           bool
	all, private []string
	named        map[string]bool
}

func (o ownership) kind(kind, p string, inPrivate bool) string {
	in := o.all
	if inPrivate {
		in = o.private
	}
	switch {
	case o.on && o.named[p] && kind == "--ro-bind-fd":
		return kind + "-named"
	case o.on && (kind != "--ro-bind-try" || covered(p, in)):
		return kind + "-own"
	case o.on && o.named[p]:
		return kind + "-named"
	}
	return kind
}

// existingDirs are the folders of paths that exist, where they really
// are (found attacking: a project named through a link in a hidden folder
// had its runs and state emptied at the link's name, and shown where they
// were).
func existingDirs(paths []string) []string {
	var out []string
	for _, p := range paths {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			if st, err := os.Stat(real); err == nil && st.IsDir() {
				out = append(out, real)
			}
		}
	}
	return out
}

// rebind keeps the paths a hidden root hides, each once and none inside
// another kept one, and never a hidden root itself or a folder above one
// (an input naming "/tmp" must not undo the private /tmp). The rest of
// the file system is readable already, and every bind is a mount to make
// and tear down (~0.3 ms a step each).
func rebind(paths, hidden []string) []string {
	var out []string
	clean := make([]string, len(paths))
	for i, p := range paths {
		clean[i] = filepath.Clean(p)
	}
	// Shortest first: a folder comes before what lies inside it.
	slices.SortStableFunc(clean, func(a, b string) int { return len(a) - len(b) })
	for _, p := range clean {
		if covered(p, out) || !covered(p, hidden) {
			continue
		}
		above := false
		for _, h := range hidden {
			if within(h, p) {
				above = true
			}
		}
		if !above {
			out = append(out, p)
		}
	}
	return out
}

// pathDirs are the folders on the tree's PATH.
func pathDirs(env []string) []string {
	var out []string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, d := range filepath.SplitList(v) {
				if filepath.IsAbs(d) {
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// workersOwn are the folders of dirs on the worker's own PATH: the tool's
// PATH names what it runs, but only the operator's toolchains are bound
// back from a hidden folder (found attacking: a manifest's env: PATH bound
// a folder behind a root-only one, another run's folder, the engine's
// state).
func workersOwn(dirs []string) []string {
	own := pathDirs([]string{"PATH=" + os.Getenv("PATH")})
	return slices.DeleteFunc(slices.Clone(dirs), func(d string) bool {
		return !slices.Contains(own, d)
	})
}

// toolchains are what a PATH needs to stay runnable where a folder of it
// is hidden (a home): the folder itself, and for a version manager's
// shims (pyenv, rbenv, nodenv) the manager's root, which they run from.
func toolchains(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		out = append(out, d)
		if filepath.Base(d) == "shims" {
			out = append(out, filepath.Dir(d))
		}
	}
	return out
}
