package registry

import (
	"fmt"
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// stampOf is what a manifest's stat says of its contents: a copy that
// keeps the size and modification time (cp -p, tar, rsync -t) still
// changes its change time and inode.
func stampOf(fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d|%d|%d.%d|%d", fi.Size(), fi.ModTime().UnixNano(), st.Ctim.Sec, st.Ctim.Nsec, st.Ino)
	}
	return fmt.Sprintf("%d|%d", fi.Size(), fi.ModTime().UnixNano())
}

// identity is which folder path names now (following links): it changes
// when a link on the way is pointed elsewhere, or a folder on the way is
// replaced or mounted over.
type identity struct{ dev, ino uint64 }

func identityOf(path string) (identity, bool) {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return identity{}, false
	}
	return identity{uint64(st.Dev), st.Ino}, true
}

// singlyNamed reports whether path is a manifest only its own folder names: not
// a link, not a file with another name (an edit through the other name,
// or the link's target, changes no watched folder).
func singlyNamed(path string) bool {
	var st unix.Stat_t
	return unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 1
}

// localFS reports whether dir is on a file system whose changes inotify
// sees whoever makes them: not one another host may change (NFS, CIFS,
// FUSE, 9p).
func localFS(dir string) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return false
	}
	switch uint32(st.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC, unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC:
		return true
	}
	return false
}
