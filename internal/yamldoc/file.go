package yamldoc

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

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
	return ReadOpened(f, display)
}

// ReadOpened reads an opened document: a regular file of at most
// MaxFileSize bytes.
func ReadOpened(f *os.File, display string) ([]byte, error) {
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

func tooLarge(display string, n int64) error {
	return caperr.New(caperr.InvalidInput, "%s is %s, more than the %s allowed", display, sizeText(n), sizeText(MaxFileSize)).At(display, 0, 0, "")
}

// notExistErr is a positioned error that still answers errors.Is(err,
// fs.ErrNotExist), for callers to whom a missing file means defaults.
type notExistErr struct{ e *caperr.Error }

func (n notExistErr) Error() string        { return n.e.Error() }
func (n notExistErr) Unwrap() error        { return n.e }
func (n notExistErr) Is(target error) bool { return target == fs.ErrNotExist }

// ParseFile reads and parses one document capflow is asked to read
// (ReadFile, then Parse); display names it in errors.
func ParseFile(path, display string) (*Doc, error) {
	if display == "" {
		display = path
	}
	data, err := ReadFile(path, display)
	if err != nil {
		return nil, err
	}
	return Parse(display, data)
}

func sizeText(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
