// Package projfile reads the files of a project capflow parses (a
// manifest, policy.yaml, capflow.yaml, a case file) beneath their folder:
// never through a link that leads out of it.
package projfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/yamldoc"
)

// ReadIn is yamldoc.ReadFile for a file of a project (a manifest, policy.yaml,
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
		return yamldoc.ReadFile(filepath.Join(root, rel), display) // the same answer for a missing file
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
	return yamldoc.ReadOpened(f, display)
}

// ReadProjectFile reads a file the project's configuration names: beneath
// root when it lies there (ReadIn), as it is when the operator named one
// outside the project.
func ReadProjectFile(root, path, display string) ([]byte, error) {
	abs, _ := filepath.Abs(path)
	if r, err := filepath.Rel(root, abs); err == nil && r != ".." && !strings.HasPrefix(r, "../") && !filepath.IsAbs(r) {
		return ReadIn(root, path, display)
	}
	return yamldoc.ReadFile(path, display)
}
