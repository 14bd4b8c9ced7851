package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/realpath"
	"github.com/capflow/capflow/internal/sandbox"
)

// A place is a path confined to one base folder (the project root, the run
// folder or the step folder). Every access goes through an os.Root opened
// on that base, so a symlink inside the project cannot lead out of it:
// checking the text of a path is not enough.
type place struct {
	root  *os.Root
	base  string // the folder root is opened on
	rel   string // relative to root, never empty ("." for the base itself)
	abs   string // the textual absolute path, for data and messages
	field string
	given string
	// unmake removes the folder opening it made (a tree's, empty), where
	// it made one.
	unmake func()
}

// Path resolves p against Root and refuses paths that textually leave both
// the project and the run folder. It does not follow symlinks: builtins
// use place (through os.Root) for the access itself.
func (e *Env) Path(field, p string) (string, error) {
	_, full, err := e.base(field, p)
	return full, err
}

// base picks the most specific allowed folder that textually holds p.
func (e *Env) base(field, p string) (string, string, error) {
	if p == "" {
		return "", "", caperr.New(caperr.InvalidInput, "%s is empty", field)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", "", caperr.New(caperr.InvalidInput, "%s %q holds a NUL byte", field, p)
	}
	full := p
	if !filepath.IsAbs(p) {
		full = filepath.Join(e.Root, p)
	}
	full = filepath.Clean(full)
	best, _, ok := beneath.Pick([]string{e.Root, e.RunDir, e.Workdir}, full)
	if !ok {
		return "", "", caperr.New(caperr.InvalidInput, "%s %q is outside the project root and the run folder", field, p)
	}
	if best == filepath.Clean(e.Root) {
		if _, _, private := beneath.Pick(e.Private, full); private {
			return "", "", caperr.New(caperr.InvalidInput, "%s %q is in another run's folder or the engine's state: a step reads the project and its own run", field, p)
		}
	}
	return best, full, nil
}

// What a place is opened for.
type access int

const (
	reading     access = iota
	writingFile        // a file's content
	writingTree        // a folder and what goes in it (archive.extract)
)

// place opens the confinement for reading p. The caller closes it.
func (e *Env) place(field, p string) (*place, error) { return e.open(field, p, reading) }

// writePlace is place for writing a file: beneath the step's own folder,
// or in the project outside what the engine trusts or runs unconfined
// (Env.Protected: the state and runs folders, tools, kits, the
// configuration, what MCP servers run); never elsewhere in the run's
// folder (its records are the engine's).
func (e *Env) writePlace(field, p string) (*place, error) { return e.open(field, p, writingFile) }

// treePlace is writePlace for a folder and what goes in it.
func (e *Env) treePlace(field, p string) (*place, error) { return e.open(field, p, writingTree) }

// open opens p's place. Beneath the step's folder or the run's, the place
// is rooted there. Beneath the project it is rooted on the very folder
// the access happens in (the target itself for a folder read or a tree
// written, else the target's folder), a handle taken once and checked
// where it really is: in the project, not in another run's folder or the
// engine's state, and, for a write, not in what the engine trusts. A link
// swapped in meanwhile, or one inside that folder leading out of it,
// leads nowhere (os.Root).
func (e *Env) open(field, p string, acc access) (*place, error) {
	b, full, err := e.base(field, p)
	if err != nil {
		return nil, err
	}
	rel, _ := filepath.Rel(b, full)
	refuse := func(format string, args ...any) (*place, error) {
		return nil, caperr.New(caperr.InvalidInput, "%s %q "+format, append([]any{field, p}, args...)...)
	}
	switch {
	case e.Workdir != "" && b == filepath.Clean(e.Workdir):
	case b != filepath.Clean(e.Root) && acc != reading:
		return refuse("is in the run's folder, which is the engine's: a builtin writes its step folder or the project")
	case b != filepath.Clean(e.Root):
	default:
		return e.openInProject(field, p, full, rel, acc)
	}
	r, err := os.OpenRoot(b)
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "%s %q: cannot open its folder", field, p)
	}
	return &place{root: r, base: b, rel: rel, abs: full, field: field, given: p}, nil
}

// openInProject is open beneath the project root.
func (e *Env) openInProject(field, p, full, rel string, acc access) (*place, error) {
	refuse := func(format string, args ...any) (*place, error) {
		return nil, caperr.New(caperr.InvalidInput, "%s %q "+format, append([]any{field, p}, args...)...)
	}
	protected := e.Protected
	if protected == nil {
		protected = manifest.Protected
	}
	if acc != reading {
		if rel == "." {
			return refuse("is the project itself: name a folder of the step's own output")
		}
		if s := manifest.Shelters(protected, rel); s != "" {
			return refuse("would change %s, which the engine trusts or runs unconfined", s)
		}
	}
	proj, err := os.OpenRoot(e.Root)
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "%s %q: cannot open the project", field, p)
	}
	defer proj.Close()
	folder, name := filepath.Dir(rel), filepath.Base(rel)
	if st, err := proj.Stat(rel); acc == writingTree || acc == reading && err == nil && st.IsDir() {
		folder, name = rel, "."
	}
	pl := &place{root: proj, base: e.Root, rel: rel, abs: full, field: field, given: p}
	have := folder
	if acc != reading {
		// Checked from the deepest folder that exists before any is made.
		for have != "." {
			if _, err := proj.Stat(have); err == nil {
				break
			}
			have = filepath.Dir(have)
		}
		if why := e.where(proj, have, filepath.Join(folder, name), acc, protected); why != "" {
			return refuse("%s", why)
		}
		if err := proj.MkdirAll(folder, 0o755); err != nil {
			return nil, pl.fail(err, "create the folder of")
		}
	}
	var unmake func()
	if acc == writingTree && have != folder {
		root := e.Root
		unmake = func() {
			if r, err := os.OpenRoot(root); err == nil {
				_ = r.Remove(folder)
				r.Close()
			}
		}
	}
	sub, err := proj.OpenRoot(folder)
	if err != nil {
		return nil, pl.fail(err, "open the folder of")
	}
	if why := e.whereHeld(sub, folder, name, acc, protected); why != "" {
		sub.Close()
		return refuse("%s", why)
	}
	return &place{root: sub, base: filepath.Join(e.Root, folder), rel: name, abs: full, field: field, given: p, unmake: unmake}, nil
}

// where says what is wrong with reaching target (beneath the project)
// through the folder dir, where dir really is ("" when nothing).
func (e *Env) where(proj *os.Root, dir, target string, acc access, protected []string) string {
	sub, err := proj.OpenRoot(dir)
	if err != nil {
		return ""
	}
	defer sub.Close()
	rest, _ := filepath.Rel(dir, target)
	return e.whereHeld(sub, dir, rest, acc, protected)
}

// whereHeld says what is wrong with the path rest beneath the folder
// handle sub (opened for the project's folder dir), where that folder
// really is: outside the project, in another run's folder or the engine's
// state, or, for a write, in what the engine trusts.
func (e *Env) whereHeld(sub *os.Root, dir, rest string, acc access, protected []string) string {
	real, ok := realOf(sub)
	if !ok {
		return ""
	}
	// A read follows a link at the path's end too, so it is judged where
	// that leads (found reviewing: a link at the project's top led into
	// another run's folder); a write replaces such a link, and an append
	// does not follow it (fileWrite: O_NOFOLLOW).
	target := filepath.Join(real, rest)
	if acc == reading {
		target = realpath.Of(target)
	}
	root, _ := filepath.EvalSymlinks(e.Root)
	inner, err := filepath.Rel(root, target)
	switch {
	case err != nil || inner == ".." || strings.HasPrefix(inner, "../"):
		return "leads to " + target + ", outside the project"
	case e.InPrivate(target):
		return "leads to " + target + ", another run's folder or the engine's state: a step reads the project and its own run"
	case acc != reading && manifest.Shelters(protected, inner) != "":
		return fmt.Sprintf("leads to %s, in %s, which the engine trusts or runs unconfined", target, manifest.Shelters(protected, inner))
	}
	if s := sandbox.ShelteredAt(protected, root, target); acc != reading && s != "" {
		return fmt.Sprintf("leads to %s, where %s leads, which the engine trusts or runs unconfined", target, s)
	}
	return ""
}

// InPrivate reports whether path (real) lies in a private folder of the
// project (Env.Private) but not in the step's own run.
func (e *Env) InPrivate(path string) bool {
	var privs []string
	for _, p := range e.Private {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			privs = append(privs, real)
		}
	}
	if _, _, in := beneath.Pick(privs, path); !in {
		return false
	}
	if e.RunDir == "" {
		return true
	}
	run, err := filepath.EvalSymlinks(e.RunDir)
	if err != nil {
		return true
	}
	_, _, own := beneath.Pick([]string{run}, path)
	return !own
}

// realOf is where a root's folder really is (false where /proc cannot
// tell).
func realOf(r *os.Root) (string, bool) {
	f, err := r.Open(".")
	if err != nil {
		return "", false
	}
	defer f.Close()
	real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	return real, err == nil
}

func (pl *place) Close() { _ = pl.root.Close() }

// fail turns an os error into a contract error naming the field and path:
// an escape through a symlink or a missing file is the caller's input,
// anything else a tool failure.
func (pl *place) fail(err error, what string) error {
	switch {
	case escapes(err):
		return caperr.New(caperr.InvalidInput, "%s %q leads outside the project root and the run folder (through a symlink)", pl.field, pl.given)
	case errors.Is(err, fs.ErrNotExist):
		return caperr.New(caperr.InvalidInput, "%s %q does not exist", pl.field, pl.given)
	case errors.Is(err, fs.ErrPermission):
		return caperr.New(caperr.InvalidInput, "%s %q: permission denied", pl.field, pl.given)
	case pathFault(err):
		return caperr.Wrap(caperr.InvalidInput, err, "%s %q", pl.field, pl.given)
	}
	return caperr.Wrap(caperr.ToolFailure, err, "%s %s %q", what, pl.field, pl.given)
}

// escapes reports os.Root's refusal of a path that leaves its base.
func escapes(err error) bool { return beneath.Escapes(err) }

// openRegular opens a regular file for reading; devices, FIFOs and
// sockets are refused (a FIFO would block, a device never ends).
func (pl *place) openRegular() (*os.File, fs.FileInfo, error) {
	return pl.open(os.O_RDONLY, 0)
}

// open opens the place with flag, refusing anything but a regular file
// (or a folder, said as such). The open never blocks (O_NONBLOCK: a FIFO
// with no writer, or no reader, answers at once) and the check is on the
// opened file, so a swap between a check and the open cannot pass.
func (pl *place) open(flag int, perm fs.FileMode) (*os.File, fs.FileInfo, error) {
	f, err := pl.root.OpenFile(pl.rel, flag|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ENXIO) {
		return nil, nil, caperr.New(caperr.InvalidInput, "%s %q is not a regular file (a FIFO)", pl.field, pl.given)
	}
	if err != nil {
		return nil, nil, pl.fail(err, "open")
	}
	st, err := beneath.Regular(f, pl.field, pl.given)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// OpenFile opens p (a path the step gave as field) for reading beneath
// the project root or the run folder, a regular file only (a link out of
// them, a FIFO, a device are refused). The caller closes it.
func (e *Env) OpenFile(field, p string) (*os.File, error) {
	pl, err := e.place(field, p)
	if err != nil {
		return nil, err
	}
	defer pl.Close()
	f, _, err := pl.openRegular()
	return f, err
}

// mkdirParent creates the folders above the place.
func (pl *place) mkdirParent() error {
	dir := filepath.Dir(pl.rel)
	if dir == "." {
		return nil
	}
	if err := pl.root.MkdirAll(dir, 0o755); err != nil {
		return pl.fail(err, "create the folder of")
	}
	return nil
}

// exists reports whether something (a file, a folder, a link) is at the
// place, without following a final symlink.
func (pl *place) exists() bool {
	_, err := pl.root.Lstat(pl.rel)
	return err == nil
}

// ctxReader stops a copy when the step is cancelled or times out.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if len(p) > 1<<20 {
		p = p[:1<<20]
	}
	return c.r.Read(p)
}

// ctxErr converts a context error into the step's contract code.
func ctxErr(ctx context.Context, what string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return caperr.Wrap(caperr.TaskTimeout, ctx.Err(), "%s", what)
	}
	return caperr.Wrap(caperr.Cancelled, ctx.Err(), "%s", what)
}

// pathFault reports errors that come from the path the caller gave (too
// long, a loop of links, a file where a folder is needed, or the other
// way round): bad input, not a tool failure worth retrying.
func pathFault(err error) bool {
	for _, e := range []error{syscall.ENAMETOOLONG, syscall.ELOOP, syscall.EISDIR, syscall.ENOTDIR, syscall.EEXIST, syscall.ENOTEMPTY} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
