package builtin

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
)

func init() {
	register("archive.create", archiveCreate)
	register("archive.extract", archiveExtract)
}

// maxExtract bounds what one archive may expand to (zip bombs).
const maxExtract = 2 << 30

func archiveFormat(in map[string]any, name string) (string, error) {
	f := str(in, "format")
	if f == "" {
		switch {
		case strings.HasSuffix(name, ".zip"):
			f = "zip"
		case strings.HasSuffix(name, ".tar.gz"), strings.HasSuffix(name, ".tgz"):
			f = "tar.gz"
		default:
			return "", caperr.New(caperr.InvalidInput, "cannot tell the format of %q: name it .zip or .tar.gz, or set format", name)
		}
	}
	return f, nil
}

func archiveCreate(ctx context.Context, in map[string]any, env *Env) (any, error) {
	src, err := env.place("source", str(in, "source"))
	if err != nil {
		return nil, err
	}
	defer src.Close()
	out, err := env.writePlace("output", str(in, "output"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	format, err := archiveFormat(in, out.abs)
	if err != nil {
		return nil, err
	}
	st, err := src.root.Stat(src.rel)
	if err != nil {
		return nil, src.fail(err, "stat")
	}
	// Names in the archive are relative to the source folder (or, for a
	// single file, to its folder). The walk goes through the root's fs.FS:
	// symlinks are not followed, so nothing outside the project is packed.
	walkRoot, base := filepath.ToSlash(src.rel), filepath.ToSlash(src.rel)
	if !st.IsDir() {
		base = path.Dir(base)
	}
	var files []string
	var skipped skips
	err = fs.WalkDir(src.root.FS(), walkRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if filepath.Join(src.base, filepath.FromSlash(p)) == out.abs {
			return nil
		}
		switch {
		case d.IsDir():
		case !d.Type().IsRegular():
			skipped.addMode(p, d.Type())
		case len(files) >= maxEntries:
			return caperr.New(caperr.InvalidInput, "source %q holds more than %d files", src.given, maxEntries)
		default:
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		if caperr.CodeOf(err) != caperr.InternalError {
			return nil, err
		}
		return nil, src.fail(err, "walk")
	}
	sort.Strings(files)
	var names []any
	add := func(w func(name string, info fs.FileInfo, r io.Reader) error) error {
		for _, p := range files {
			if ctx.Err() != nil {
				return ctxErr(ctx, "archive")
			}
			name := p
			if base != "." {
				name = strings.TrimPrefix(p, base+"/")
			}
			// Walked as a regular file; opened so that whatever replaced
			// it since (a FIFO, say) is refused, never waited on.
			r, err := src.root.OpenFile(filepath.FromSlash(p), os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				return err
			}
			info, err := beneath.Regular(r, "source", p)
			if err == nil {
				err = w(name, info, ctxReader{ctx, r})
			}
			r.Close()
			if err != nil {
				return err
			}
			names = append(names, name)
		}
		return nil
	}
	err = env.replace(ctx, out, boolean(in, "overwrite"), func(f io.Writer) error {
		switch format {
		case "zip":
			zw := zip.NewWriter(f)
			err := add(func(name string, info fs.FileInfo, r io.Reader) error {
				h, _ := zip.FileInfoHeader(info)
				h.Name, h.Method = name, zip.Deflate
				w, err := zw.CreateHeader(h)
				if err == nil {
					_, err = io.Copy(w, r)
				}
				return err
			})
			if cerr := zw.Close(); err == nil {
				err = cerr
			}
			return err
		case "tar.gz":
			gz := gzip.NewWriter(f)
			tw := tar.NewWriter(gz)
			err := add(func(name string, info fs.FileInfo, r io.Reader) error {
				h, _ := tar.FileInfoHeader(info, "")
				h.Name = name
				if err := tw.WriteHeader(h); err != nil {
					return err
				}
				_, err := io.Copy(tw, r)
				return err
			})
			if cerr := tw.Close(); err == nil {
				err = cerr
			}
			if cerr := gz.Close(); err == nil {
				err = cerr
			}
			return err
		}
		return caperr.New(caperr.InvalidInput, "format %q is not zip or tar.gz", format)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxErr(ctx, "archive")
		}
		return nil, err
	}
	sum, size, _ := sha256Of(ctx, out.root, out.rel)
	env.Feedback.Info("archive", fmt.Sprintf("packed %d files into %s (%s)", len(names), filepath.Base(out.abs), humanBytes(size)))
	if names == nil {
		names = []any{}
	}
	return skipped.report(env, "archive", map[string]any{"path": out.abs, "format": format, "files": names, "count": len(names), "bytes": size, "sha256": sum}), nil
}

// maxEntries bounds the files one archive may hold or create.
const maxEntries = 100000

// archiveExtract unpacks into a staging folder inside dest first and moves
// the files into place only when the whole archive was read within its
// limits: a refused zip bomb or a corrupt archive leaves nothing behind.
func archiveExtract(ctx context.Context, in map[string]any, env *Env) (any, error) {
	src, err := env.place("archive", str(in, "archive"))
	if err != nil {
		return nil, err
	}
	defer src.Close()
	dest, err := env.treePlace("dest", str(in, "dest"))
	if err != nil {
		return nil, err
	}
	defer dest.Close()
	format, err := archiveFormat(in, src.abs)
	if err != nil {
		return nil, err
	}
	af, _, err := src.openRegular()
	if err != nil {
		return nil, err
	}
	defer af.Close()
	destExisted := dest.exists()
	if err := dest.root.MkdirAll(dest.rel, 0o755); err != nil {
		return nil, dest.fail(err, "create")
	}
	stage := path.Join(filepath.ToSlash(dest.rel), ".capflow-partial-"+randHex())
	if err := dest.root.Mkdir(stage, 0o700); err != nil {
		return nil, dest.fail(err, "create a staging folder in")
	}
	cleanup := func() {
		_ = dest.root.RemoveAll(stage)
		if !destExisted {
			_ = dest.root.Remove(dest.rel)
		}
		if dest.unmake != nil {
			dest.unmake() // the folder opening it made
		}
	}
	var skipped skips
	names, total, err := unpack(ctx, af, format, &skipped, func(name string) (string, error) {
		if !fs.ValidPath(name) || strings.Contains(name, "\\") {
			return "", caperr.New(caperr.InvalidInput, "archive entry %q would be written outside %s", name, dest.given)
		}
		return path.Join(stage, name), nil
	}, dest)
	if err == nil {
		err = env.placeEntries(ctx, dest, stage, names, boolean(in, "overwrite"))
	}
	if err != nil {
		cleanup()
		if ctx.Err() != nil {
			return nil, ctxErr(ctx, "extract")
		}
		return nil, asToolErr(err)
	}
	_ = dest.root.RemoveAll(stage)
	env.Feedback.Info("extract", fmt.Sprintf("extracted %d files (%s)", len(names), humanBytes(total)))
	out := make([]any, len(names))
	for i, n := range names {
		out[i] = n
	}
	return skipped.report(env, "extract", map[string]any{"dest": dest.abs, "files": out, "count": len(out), "bytes": total}), nil
}

// unpack writes every regular entry of the archive to target(name), inside
// dest's root, stopping at maxExtract bytes and maxEntries files.
func unpack(ctx context.Context, f *os.File, format string, skipped *skips, target func(string) (string, error), dest *place) ([]string, int64, error) {
	var names []string
	var total int64
	write := func(name string, mode fs.FileMode, r io.Reader) error {
		if ctx.Err() != nil {
			return ctxErr(ctx, "extract")
		}
		if len(names) >= maxEntries {
			return caperr.New(caperr.InvalidInput, "archive holds more than %d files", maxEntries)
		}
		t, err := target(name)
		if err != nil {
			return err
		}
		if err := dest.root.MkdirAll(path.Dir(t), 0o755); err != nil {
			return err
		}
		w, err := dest.root.OpenFile(t, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode.Perm()|0o600)
		if err != nil {
			return caperr.Wrap(caperr.InvalidInput, err, "archive entry %q", name)
		}
		n, err := io.Copy(w, io.LimitReader(ctxReader{ctx, r}, maxExtract-total+1))
		w.Close()
		total += n
		if total > maxExtract {
			return caperr.New(caperr.InvalidInput, "archive expands past %s", humanBytes(maxExtract))
		}
		names = append(names, name)
		return err
	}
	var err error
	switch format {
	case "zip":
		err = unzipEntries(f, skipped, write)
	case "tar.gz":
		err = untarEntries(f, skipped, write)
	default:
		err = caperr.New(caperr.InvalidInput, "format %q is not zip or tar.gz", format)
	}
	if err != nil {
		return nil, 0, err
	}
	return names, total, nil
}

// placeEntries moves staged files into dest. Every target is checked
// first (a file there from before the step needs overwrite; a symlink on
// the way out of the project is refused), so a refusal moves nothing.
func (e *Env) placeEntries(ctx context.Context, dest *place, stage string, names []string, overwrite bool) error {
	final := func(n string) string { return path.Join(filepath.ToSlash(dest.rel), n) }
	for _, n := range names {
		t := final(n)
		// Every folder on the way must be a folder (or not exist yet).
		for dir := path.Dir(t); dir != "." && dir != "/" && dir != filepath.ToSlash(dest.rel); dir = path.Dir(dir) {
			if st, err := dest.root.Lstat(dir); err == nil && !st.IsDir() && st.Mode()&fs.ModeSymlink == 0 {
				return caperr.New(caperr.InvalidInput, "dest %q: entry %q needs %q to be a folder, and it is a file", dest.given, n, dir)
			}
		}
		if _, err := dest.root.Stat(path.Dir(t)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			if escapes(err) {
				return caperr.New(caperr.InvalidInput, "dest %q: entry %q would be written through a symlink that leads outside the project", dest.given, n)
			}
			if pathFault(err) {
				return caperr.Wrap(caperr.InvalidInput, err, "dest %q: entry %q", dest.given, n)
			}
			return err
		}
		tp := &place{root: dest.root, base: dest.base, rel: filepath.FromSlash(t), abs: filepath.Join(dest.base, filepath.FromSlash(t)), field: "dest", given: path.Join(dest.given, n)}
		if err := e.mayReplace(tp, overwrite); err != nil {
			return err
		}
	}
	var created []string
	for _, n := range names {
		if ctx.Err() != nil {
			return ctxErr(ctx, "extract")
		}
		t := final(n)
		abs := filepath.Join(dest.base, filepath.FromSlash(t))
		if _, err := dest.root.Lstat(t); err != nil {
			created = append(created, abs)
		}
		if err := dest.root.MkdirAll(path.Dir(t), 0o755); err != nil {
			return err
		}
		if err := dest.root.Rename(path.Join(stage, n), t); err != nil {
			return err
		}
	}
	e.noteCreated(created...)
	return nil
}

func asToolErr(err error) error {
	if pathFault(err) {
		return caperr.Wrap(caperr.InvalidInput, err, "extract")
	}
	if escapes(err) {
		return caperr.New(caperr.InvalidInput, "a path leads outside the project root and the run folder (through a symlink): %v", err)
	}
	if caperr.CodeOf(err) != caperr.InternalError {
		return err
	}
	return caperr.Wrap(caperr.ToolFailure, err, "extract")
}
