//go:build unix

package cache

import (
	"os"
	"syscall"
)

func fileID(st os.FileInfo) (uint64, uint64) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Dev), uint64(s.Ino) //nolint:unconvert // Dev is int32 on some systems
	}
	return 0, 0
}
