package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/capflow/capflow/internal/caperr"
)

// TrustedDirsEnv lists folders whose capflow.yaml is used whoever owns it
// (git's safe.directory): paths separated by ':', or "*" for every one.
const TrustedDirsEnv = "CAPFLOW_TRUSTED_DIRS"

// FindProject is the project of a command (or worker) started in dir
// without one named: the nearest folder holding capflow.yaml, from dir up
// (as git finds its repository). found is false when none does: dir
// itself, with the defaults. A capflow.yaml found that another user could
// have written (Untrusted) is an error: it names tools to run, servers to
// dial and where keys go.
func FindProject(dir string) (root string, found bool, err error) {
	for d := dir; ; d = filepath.Dir(d) {
		file := filepath.Join(d, FileName)
		if st, serr := os.Stat(file); serr == nil && st.Mode().IsRegular() {
			if why := Untrusted(file); why != "" {
				return d, true, caperr.New(caperr.ConfigError, "%s %s: capflow takes no configuration another user could have written. If you trust it, name the project (--project %s) or add the folder to %s (as git's safe.directory)",
					file, why, d, TrustedDirsEnv).At(file, 0, 0, "")
			}
			return d, true, nil
		}
		if filepath.Dir(d) == d {
			return dir, false, nil
		}
	}
}

// Untrusted says why a configuration file may hold another user's words
// ("" when it may not): it, or the folder holding it, is owned by someone
// other than this user or root (or the user sudo ran for), or others may
// write it. A folder in TrustedDirsEnv is trusted whatever its owner.
func Untrusted(file string) string {
	dir := filepath.Dir(file)
	if trustedDir(dir) {
		return ""
	}
	for _, p := range []string{file, dir} {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Sprintf("cannot be checked (%v)", err)
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return ""
		}
		what := "is"
		if p == dir {
			what = "is in a folder"
		}
		switch {
		case !ownUID(sys.Uid):
			return fmt.Sprintf("%s owned by uid %d, not by you (uid %d) or root", what, sys.Uid, os.Geteuid())
		case st.Mode().Perm()&0o002 != 0:
			return fmt.Sprintf("%s others may write (mode %s)", what, st.Mode().Perm())
		}
	}
	return ""
}

// ownUID: uid is this user's, root's, or (run as root by sudo) the
// invoking user's.
func ownUID(uid uint32) bool {
	if int(uid) == os.Geteuid() || uid == 0 {
		return true
	}
	if os.Geteuid() == 0 {
		if s, err := strconv.Atoi(os.Getenv("SUDO_UID")); err == nil && uint32(s) == uid {
			return true
		}
	}
	return false
}

func trustedDir(dir string) bool {
	list := strings.Split(os.Getenv(TrustedDirsEnv), ":")
	if slices.Contains(list, "*") {
		return true
	}
	real, _ := filepath.EvalSymlinks(dir)
	for _, t := range list {
		if t == "" {
			continue
		}
		t = filepath.Clean(t)
		if t == filepath.Clean(dir) || t == real {
			return true
		}
	}
	return false
}
