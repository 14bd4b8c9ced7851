package builtin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/capflow/capflow/internal/caperr"
)

func init() {
	register("file.read", fileRead)
	register("file.write", fileWrite)
	register("file.checksum", fileChecksum)
	register("file.list", fileList)
}

// Limits of file.read: what one step may put into its envelope (and so
// into Temporal's history) is bounded; larger files are read in part.
const (
	defaultMaxRead = 1 << 20
	MaxRead        = 16 << 20
	maxListed      = 100000
)

func fileRead(ctx context.Context, in map[string]any, env *Env) (any, error) {
	max := integer(in, "max_bytes", defaultMaxRead)
	if max < 1 || max > MaxRead {
		return nil, caperr.New(caperr.InvalidInput, "max_bytes %d is out of range: 1 to %d (%s)", max, int64(MaxRead), humanBytes(MaxRead))
	}
	b, st, pl, err := env.readRegular(ctx, "path", str(in, "path"), max+1)
	if err != nil {
		return nil, err
	}
	truncated := int64(len(b)) > max
	if truncated {
		b = b[:max]
	}
	enc := str(in, "encoding")
	if enc == "" {
		enc = "text"
	}
	content := string(b)
	if enc == "base64" {
		content = base64.StdEncoding.EncodeToString(b)
	}
	env.Feedback.Info("read", "read "+humanBytes(int64(len(b)))+" from "+pl.given)
	return map[string]any{"path": pl.abs, "content": content, "encoding": enc, "size": st.Size(), "truncated": truncated}, nil
}

// readRegular reads at most limit bytes of a regular file in a place
// (honouring cancellation); the returned place is closed already and only
// good for its names.
func (e *Env) readRegular(ctx context.Context, field, p string, limit int64) ([]byte, fs.FileInfo, *place, error) {
	pl, err := e.place(field, p)
	if err != nil {
		return nil, nil, nil, err
	}
	defer pl.Close()
	f, st, err := pl.openRegular()
	if err != nil {
		return nil, nil, nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(ctxReader{ctx, f}, limit))
	if ctx.Err() != nil {
		return nil, nil, nil, ctxErr(ctx, "read "+pl.given)
	}
	if err != nil {
		return nil, nil, nil, pl.fail(err, "read")
	}
	return b, st, pl, nil
}

func fileWrite(ctx context.Context, in map[string]any, env *Env) (any, error) {
	data := []byte(str(in, "content"))
	if str(in, "encoding") == "base64" {
		var err error
		if data, err = base64.StdEncoding.DecodeString(str(in, "content")); err != nil {
			return nil, caperr.Wrap(caperr.InvalidInput, err, "content is not valid base64")
		}
	}
	pl, err := env.writePlace("path", str(in, "path"))
	if err != nil {
		return nil, err
	}
	defer pl.Close()
	if boolean(in, "append") {
		if err := pl.mkdirParent(); err != nil {
			return nil, err
		}
		f, st, err := pl.open(os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		// Never through a link at its end (os.Root follows one): the file
		// opened must be the one under its name (found reviewing:
		// notes.txt, a link to policy.yaml, appended to the policy).
		if named, err := pl.root.Lstat(pl.rel); err != nil || !os.SameFile(st, named) {
			f.Close()
			return nil, caperr.New(caperr.InvalidInput, "path %q is a link: an append follows none", pl.given)
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, pl.fail(err, "append to")
		}
	} else if err := env.replace(ctx, pl, boolean(in, "overwrite"), func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}); err != nil {
		return nil, err
	}
	env.Feedback.Info("write", "wrote "+humanBytes(int64(len(data)))+" to "+pl.given)
	return map[string]any{"path": pl.abs, "bytes": len(data)}, nil
}

// replace writes a file atomically (a temporary file renamed over the
// target), so a failed or cancelled write leaves nothing partial. A file
// that existed before the step is replaced only with overwrite; one this
// step created (an earlier attempt) may be replaced by a retry.
func (e *Env) replace(ctx context.Context, pl *place, overwrite bool, write func(io.Writer) error) error {
	if err := e.mayReplace(pl, overwrite); err != nil {
		return err
	}
	if err := pl.mkdirParent(); err != nil {
		return err
	}
	tmp := path.Join(filepath.ToSlash(filepath.Dir(pl.rel)), ".capflow-partial-"+randHex())
	f, err := pl.root.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return pl.fail(err, "create a temporary file for")
	}
	existed := pl.exists()
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && ctx.Err() != nil {
		err = ctxErr(ctx, "write "+pl.given)
	}
	if err == nil {
		err = pl.root.Rename(tmp, pl.rel)
	}
	if err != nil {
		_ = pl.root.Remove(tmp)
		if caperr.CodeOf(err) != caperr.InternalError {
			return err
		}
		return pl.fail(err, "write")
	}
	if !existed {
		e.noteCreated(pl.abs)
	}
	return nil
}

func randHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func fileChecksum(ctx context.Context, in map[string]any, env *Env) (any, error) {
	pl, err := env.place("path", str(in, "path"))
	if err != nil {
		return nil, err
	}
	defer pl.Close()
	f, _, err := pl.openRegular()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, ctxReader{ctx, f})
	if ctx.Err() != nil {
		return nil, ctxErr(ctx, "checksum "+pl.given)
	}
	if err != nil {
		return nil, pl.fail(err, "read")
	}
	env.Feedback.Info("hash", "sha256 of "+humanBytes(n))
	return map[string]any{"path": pl.abs, "sha256": hex.EncodeToString(h.Sum(nil)), "size": n}, nil
}

// sha256Of hashes a file inside a place's root.
func sha256Of(ctx context.Context, root *os.Root, rel string) (string, int64, error) {
	f, err := root.Open(rel)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, ctxReader{ctx, f})
	return hex.EncodeToString(h.Sum(nil)), n, err
}

func fileList(ctx context.Context, in map[string]any, env *Env) (any, error) {
	pattern := str(in, "pattern")
	if pattern == "" {
		pattern = "*"
	}
	if _, err := filepath.Match(pattern, ""); err != nil {
		return nil, caperr.New(caperr.InvalidInput, "pattern %q is not a valid glob", pattern)
	}
	pl, err := env.place("dir", str(in, "dir"))
	if err != nil {
		return nil, err
	}
	defer pl.Close()
	recursive := boolean(in, "recursive")
	files := []any{}
	var skipped skips
	// Walking through the root's fs.FS: symlinks are listed as entries,
	// never followed out of the project.
	err = fs.WalkDir(pl.root.FS(), filepath.ToSlash(pl.rel), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if p != filepath.ToSlash(pl.rel) && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		ok, _ := filepath.Match(pattern, d.Name())
		switch {
		case !ok:
		case !d.Type().IsRegular():
			skipped.addMode(filepath.Join(pl.base, filepath.FromSlash(p)), d.Type())
		case len(files) >= maxListed:
			return caperr.New(caperr.InvalidInput, "dir %q holds more than %d matching files", pl.given, maxListed)
		default:
			files = append(files, filepath.Join(pl.base, filepath.FromSlash(p)))
		}
		return nil
	})
	if ctx.Err() != nil {
		return nil, ctxErr(ctx, "list "+pl.given)
	}
	if err != nil {
		if caperr.CodeOf(err) != caperr.InternalError {
			return nil, err
		}
		return nil, pl.fail(err, "list")
	}
	sort.Slice(files, func(i, j int) bool { return files[i].(string) < files[j].(string) })
	env.Feedback.Info("list", "found "+itoa(len(files))+" files")
	return skipped.report(env, "list", map[string]any{"dir": pl.abs, "files": files, "count": len(files)}), nil
}
