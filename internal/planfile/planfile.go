// Package planfile reads the plan files a plan or a client names: a
// sub-plan, a run's plan_file (plan.ReadFunc).
package planfile

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/yamldoc"
)

// Read reads the plan file at rel, a path from the project root
// that plan.InProject accepted, through a handle on the root (os.Root): a link
// swapped in after that check cannot lead the read out of the project.
// os.Root refuses a link with an absolute target; one that leads inside
// the project is read by the path it leads to, through the same handle.
func Read(root, rel string) ([]byte, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "cannot read the project folder %s", root)
	}
	defer r.Close()
	open := func(name string) (*os.File, error) { return r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0) }
	f, err := open(rel)
	if beneath.Escapes(err) {
		if inside, ok := linkedInside(root, rel); ok {
			f, err = open(inside)
		}
	}
	var data []byte
	if err == nil {
		data, err = yamldoc.ReadOpened(f, rel)
	} else {
		err = beneath.Refusal(err, caperr.InvalidInput, "file", rel)
	}
	if err != nil {
		ce := caperr.As(err, caperr.InvalidInput)
		ce.Message += fmt.Sprintf("; a plan's files are named from the project root, %s", root)
		return nil, ce
	}
	return data, nil
}

// linkedInside is where the links on rel lead, from the project's real
// root, when that is inside it.
func linkedInside(root, rel string) (string, bool) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", false
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, rel))
	if err != nil {
		return "", false
	}
	inside, ok := beneath.Rel(realRoot, real)
	return inside, ok && inside != "."
}
