// Package buildinfo names the running build as Go stamped it: the main
// module's version and the VCS revision it was built from.
package buildinfo

import (
	"runtime/debug"
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
