package yamldoc

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
)

// ReadFile reads a document capflow is asked to parse (a manifest, a plan,
// capflow.yaml, policy.yaml, router.yaml, an inputs file). Only regular
// files of at most MaxFileSize are read: a FIFO would block forever and a
// device such as /dev/zero never ends. display names the file in errors.
// A missing file keeps fs.ErrNotExist in its chain.
func ReadFile(path, display string) ([]byte, error) {
	if display == "" {
		display = path
	}
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, notExistErr{caperr.New(caperr.InvalidInput, "%s does not exist", display).At(display, 0, 0, "")}
		}
		return nil, caperr.Wrap(caperr.InvalidInput, err, "cannot read %s", display).At(display, 0, 0, "")
	}
	if st.IsDir() {
		return nil, caperr.New(caperr.InvalidInput, "%s is a directory, not a file", display).At(display, 0, 0, "")
	}
	if !st.Mode().IsRegular() {
		return nil, caperr.New(caperr.InvalidInput, "%s is not a regular file (%s)", display, st.Mode().Type()).At(display, 0, 0, "")
	}
	if st.Size() > MaxFileSize {
		return nil, tooLarge(display, st.Size())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "cannot read %s", display).At(display, 0, 0, "")
	}
	return readOpened(f, display)
}

// readOpened reads an opened document: a regular file of at most
// MaxFileSize bytes.
func readOpened(f *os.File, display string) ([]byte, error) {
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "cannot read %s", display).At(display, 0, 0, "")
	}
	if !st.Mode().IsRegular() {
		return nil, caperr.New(caperr.InvalidInput, "%s is not a regular file (%s)", display, st.Mode().Type()).At(display, 0, 0, "")
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "cannot read %s", display).At(display, 0, 0, "")
	}
	if len(b) > MaxFileSize {
		return nil, tooLarge(display, int64(len(b)))
	}
	return b, nil
}

// ReadIn is ReadFile for a file of a project (a manifest, policy.yaml,
// capflow.yaml, a case file): read beneath root, never through a link
// that leads out of it (a tool.yaml linked to ~/.aws/credentials is
// refused unread, its bytes never quoted in an error).
func ReadIn(root, path, display string) ([]byte, error) {
	if display == "" {
		display = path
	}
	root, _ = filepath.Abs(root)
	abs, _ := filepath.Abs(path)
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, caperr.New(caperr.InvalidInput, "%s is outside %s: not read", display, root).At(display, 0, 0, "")
	}
	if _, err := os.Lstat(filepath.Join(root, rel)); err != nil {
		return ReadFile(filepath.Join(root, rel), display) // the same answer for a missing file
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "cannot read %s", display).At(display, 0, 0, "")
	}
	defer r.Close()
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if beneath.Escapes(err) {
			return nil, caperr.New(caperr.InvalidInput, "%s leads outside %s (a link): not read", display, root).At(display, 0, 0, "")
		}
		return nil, caperr.Wrap(caperr.InvalidInput, err, "cannot read %s", display).At(display, 0, 0, "")
	}
	return readOpened(f, display)
}

// ReadProjectFile reads a file the project's configuration names: beneath
// root when it lies there (ReadIn), as it is when the operator named one
// outside the project.
func ReadProjectFile(root, path, display string) ([]byte, error) {
	abs, _ := filepath.Abs(path)
	if r, err := filepath.Rel(root, abs); err == nil && r != ".." && !strings.HasPrefix(r, "../") && !filepath.IsAbs(r) {
		return ReadIn(root, path, display)
	}
	return ReadFile(path, display)
}

func tooLarge(display string, n int64) error {
	return caperr.New(caperr.InvalidInput, "%s is %s, more than the %s allowed", display, sizeText(n), sizeText(MaxFileSize)).At(display, 0, 0, "")
}

// notExistErr is a positioned error that still answers errors.Is(err,
// fs.ErrNotExist), for callers to whom a missing file means defaults.
type notExistErr struct{ e *caperr.Error }

func (n notExistErr) Error() string        { return n.e.Error() }
func (n notExistErr) Unwrap() error        { return n.e }
func (n notExistErr) Is(target error) bool { return target == fs.ErrNotExist }
