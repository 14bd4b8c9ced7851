// Package buildinfo names the running build as Go stamped it: the main
// module's version and the VCS revision it was built from.
package buildinfo

import (
	"debug/elf"
	"os"
	"runtime/debug"
	"strings"
	"sync"
)

type stamp struct{ version, revision, modified string }

// read is the zero stamp where the binary carries no build information.
var read = sync.OnceValue(func() stamp {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return stamp{}
	}
	return stampOf(bi)
})

func stampOf(bi *debug.BuildInfo) stamp {
	s := stamp{version: bi.Main.Version}
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			s.revision = kv.Value
		case "vcs.modified":
			s.modified = kv.Value
		}
	}
	return s
}

// Stamp is the module version, then the revision and whether the tree
// had changes, where Go recorded them ("" when the binary carries no
// build information).
func Stamp() string { return read().line() }

func (s stamp) line() string {
	out := s.version
	for _, v := range []string{s.revision, s.modified} {
		if v != "" {
			out += " " + v
		}
	}
	return out
}

// Revision is the VCS revision the binary was built from and whether the
// tree had uncommitted changes; "" where Go recorded none (go test
// binaries, a tree without git, GOFLAGS=-buildvcs=false).
func Revision() (rev string, changed bool) {
	s := read()
	return s.revision, s.modified == "true"
}

// ContentID is the hash of the running executable's content that the Go
// linker wrote in it (the last part of its build ID, as `go tool buildid`
// prints it): a build's name for free, where hashing the binary again
// costs a fifth of a second of CPU. "" where it cannot be read (not ELF).
var ContentID = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return contentIDOf(exe)
})

// contentIDOf reads the Go build ID note of the ELF file at path.
func contentIDOf(path string) string {
	f, err := elf.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := f.Section(".note.go.buildid")
	if s == nil || s.Size > 4096 {
		return ""
	}
	note, err := s.Data()
	// The note: name size, description size, type (4 bytes each), the
	// name "Go\x00\x00", then the build ID.
	if err != nil || len(note) < 16 || string(note[12:16]) != "Go\x00\x00" {
		return ""
	}
	size := f.ByteOrder.Uint32(note[4:8])
	if uint64(size) > uint64(len(note)-16) {
		return ""
	}
	id := string(note[16 : 16+size])
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		id = id[i+1:]
	}
	return id
}
