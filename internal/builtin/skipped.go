package builtin

import (
	"archive/tar"
	"fmt"
	"io/fs"
)

// maxSkipped bounds the skipped entries a builtin lists (the count is
// always whole).
const maxSkipped = 1000

// skips collects what a builtin passed over, and why: nothing is dropped
// without a word (a link or a device in a folder or an archive).
type skips struct {
	list  []any
	count int
}

func (s *skips) add(path, kind, reason string) {
	s.count++
	if len(s.list) < maxSkipped {
		s.list = append(s.list, map[string]any{"path": path, "type": kind, "reason": reason})
	}
}

// addMode records an entry of a folder by its mode.
func (s *skips) addMode(path string, mode fs.FileMode) {
	if mode&fs.ModeSymlink != 0 {
		s.add(path, "symlink", "a symbolic link: not followed (it could lead anywhere)")
		return
	}
	s.add(path, modeName(mode), "not a regular file")
}

// addTar records a tar entry that is not extracted.
func (s *skips) addTar(h *tar.Header) {
	switch h.Typeflag {
	case tar.TypeSymlink, tar.TypeLink:
		s.add(h.Name, "link", fmt.Sprintf("links are not extracted (this one points to %q): one could lead outside dest", h.Linkname))
	case tar.TypeDir, tar.TypeXGlobalHeader, tar.TypeXHeader:
	default:
		s.add(h.Name, modeName(h.FileInfo().Mode()), "not a regular file: only files (and their folders) are extracted")
	}
}

// report states the skipped entries in the data and, when there are
// any, in a warning.
func (s *skips) report(env *Env, phase string, data map[string]any) map[string]any {
	data["skipped"] = append([]any{}, s.list...)
	if s.count > 0 {
		data["skipped_count"] = s.count
		env.Feedback.Warn(phase, fmt.Sprintf("%d entries skipped (links, devices, FIFOs): see skipped", s.count))
	}
	return data
}

func modeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "other"
}
