// Package beneath is the one way capflow opens a name that comes from
// outside its own code (a tool's output, a cache entry, a plan or case
// file, an MCP argument, a console request): beneath a root folder,
// through Go's os.Root, which refuses "..", absolute names and symlinks
// that leave the root, at the moment of the open. Nothing here checks a
// path's text and then opens it by name: a check and the use are one
// system call.
//
// Every error it returns is a caperr INVALID_INPUT naming the field and
// the name as given, except failures of the machine itself (an I/O
// error): OBSERVABILITY_ERROR.
package beneath

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/capflow/capflow/internal/caperr"
)

// Rel returns p relative to base when p (absolute, or relative to base)
// lies textually beneath base or is base itself ("."). It is how a name is
// matched to its root; the open beneath the root is what enforces it.
func Rel(base, p string) (string, bool) {
	if p == "" || strings.IndexByte(p, 0) >= 0 {
		return "", false
	}
	base = filepath.Clean(base)
	full := p
	if !filepath.IsAbs(full) {
		full = filepath.Join(base, full)
	}
	rel, err := filepath.Rel(base, filepath.Clean(full))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

// Pick returns the most specific of bases that textually holds the
// absolute path p, and p relative to it.
func Pick(bases []string, p string) (base, rel string, ok bool) {
	if !filepath.IsAbs(p) {
		return "", "", false
	}
	for _, b := range bases {
		if b == "" {
			continue
		}
		if r, in := Rel(b, p); in && len(filepath.Clean(b)) > len(base) {
			base, rel, ok = filepath.Clean(b), r, true
		}
	}
	return base, rel, ok
}

// Escapes reports os.Root's refusal of a name that leaves its root (the
// standard library does not export that error, only its text).
func Escapes(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// Refusal is the contract error for err, an error of opening name (given
// as field said it) beneath a root: leaving the root, a missing file, a
// bad name are the caller's input; anything else keeps code.
func Refusal(err error, code caperr.Code, field, given string) error {
	switch {
	case err == nil:
		return nil
	case Escapes(err):
		return caperr.New(caperr.InvalidInput, "%s %q leads outside its folder (through \"..\", an absolute name or a symlink)", field, given)
	case errors.Is(err, fs.ErrNotExist):
		return caperr.New(caperr.InvalidInput, "%s %q does not exist", field, given)
	case errors.Is(err, fs.ErrPermission):
		return caperr.New(caperr.InvalidInput, "%s %q: permission denied", field, given)
	case errors.Is(err, syscall.ENXIO):
		return caperr.New(caperr.InvalidInput, "%s %q is not a regular file (a FIFO or socket)", field, given)
	}
	for _, e := range []error{syscall.ENAMETOOLONG, syscall.ELOOP, syscall.EISDIR, syscall.ENOTDIR, syscall.EEXIST, syscall.ENOTEMPTY, syscall.EINVAL} {
		if errors.Is(err, e) {
			return caperr.Wrap(caperr.InvalidInput, err, "%s %q", field, given)
		}
	}
	return caperr.Wrap(code, err, "%s %q", field, given)
}

// Regular returns f's file info when f is a regular file, and an
// INVALID_INPUT error naming field and given otherwise.
func Regular(f *os.File, field, given string) (fs.FileInfo, error) {
	st, err := f.Stat()
	switch {
	case err != nil:
		return nil, caperr.Wrap(caperr.InvalidInput, err, "%s %q", field, given)
	case st.IsDir():
		return nil, caperr.New(caperr.InvalidInput, "%s %q is a directory", field, given)
	case !st.Mode().IsRegular():
		return nil, caperr.New(caperr.InvalidInput, "%s %q is not a regular file (%s)", field, given, st.Mode().Type())
	}
	return st, nil
}

// OpenRegular opens rel beneath r for reading when it is a regular file.
// The open never blocks (O_NONBLOCK: a FIFO with no writer answers at
// once) and the check is on the opened file, so a swap between a check
// and the open cannot pass.
func OpenRegular(r *os.Root, rel, field, given string) (*os.File, fs.FileInfo, error) {
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, Refusal(err, caperr.ObservabilityError, field, given)
	}
	st, err := Regular(f, field, given)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// ReadFile reads the regular file p (absolute, or relative to base)
// beneath base, refusing one larger than max bytes.
func ReadFile(base, p string, max int64, field string) ([]byte, error) {
	rel, ok := Rel(base, p)
	if !ok {
		return nil, caperr.New(caperr.InvalidInput, "%s %q is outside %s", field, p, base)
	}
	r, err := os.OpenRoot(base)
	if err != nil {
		return nil, Refusal(err, caperr.ObservabilityError, field, p)
	}
	defer r.Close()
	return ReadIn(r, rel, max, field, p)
}

// ReadIn reads the regular file rel beneath r, refusing one larger than
// max bytes (given is the name as its sender wrote it, for messages).
func ReadIn(r *os.Root, rel string, max int64, field, given string) ([]byte, error) {
	p := given
	f, st, err := OpenRegular(r, rel, field, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > max {
		return nil, caperr.New(caperr.InvalidInput, "%s %q is %d bytes, more than the %d allowed", field, p, st.Size(), max)
	}
	raw, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, Refusal(err, caperr.ObservabilityError, field, p)
	}
	if int64(len(raw)) > max {
		return nil, caperr.New(caperr.InvalidInput, "%s %q is more than the %d bytes allowed", field, p, max)
	}
	return raw, nil
}

// Create writes a new file at rel beneath r from src, whole or not at all:
// its folders are made beneath r, the bytes go to a temporary file beside
// it, and a rename beneath r gives it its name (replacing a file there,
// never following a link out of r). An error of write (a digest that
// does not match) leaves nothing behind.
func Create(r *os.Root, rel string, perm fs.FileMode, write func(io.Writer) error) error {
	rel = filepath.Clean(rel)
	if rel == "." {
		return fmt.Errorf("beneath: no file name")
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp := filepath.Join(filepath.Dir(rel), "."+filepath.Base(rel)+".tmp-"+randSuffix())
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Rename(tmp, rel)
	}
	if err != nil {
		_ = r.Remove(tmp)
	}
	return err
}

func randSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
