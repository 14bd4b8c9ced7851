package sandbox

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A cgroup's control files: the limits a tree gets and the counters it
// is judged by.

// control is the controller's file, opened once by its path
// (nil where it cannot be opened).
func (cg *cgroup) control(c, file string) *os.File {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	key := c + "/" + file
	if f, ok := cg.files[key]; ok {
		return f
	}
	f, err := os.OpenFile(filepath.Join(cg.dirs[c], file), os.O_RDWR, 0)
	if err != nil {
		f, err = os.Open(filepath.Join(cg.dirs[c], file)) // a file only read
	}
	if err != nil {
		return nil // not kept: the next call tries again
	}
	if cg.files == nil {
		cg.files = map[string]*os.File{}
	}
	cg.files[key] = f
	return f
}

// closeFiles closes the control files (the folders are being removed).
func (cg *cgroup) closeFiles() {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	for _, f := range cg.files {
		_ = f.Close()
	}
	cg.files = nil
}

func (cg *cgroup) read(c, file string) string {
	if cg == nil || cg.dirs[c] == "" {
		return ""
	}
	f := cg.control(c, file)
	if f == nil {
		b, _ := os.ReadFile(filepath.Join(cg.dirs[c], file))
		return strings.TrimSpace(string(b))
	}
	// At offset 0 the kernel writes the file anew (seq_file); the files
	// read here are a line or three. (cgroup.procs is read by path: a v1
	// kernel may answer a held one from a list it made up to a second ago.)
	var buf [512]byte
	n, _ := f.ReadAt(buf[:], 0)
	return strings.TrimSpace(string(buf[:n]))
}

func (cg *cgroup) has(c string) bool { return cg != nil && cg.dirs[c] != "" }

// hasFile reports whether the controller's folder has file (memsw's only
// where the kernel accounts swap).
func (cg *cgroup) hasFile(c, file string) bool {
	if !cg.has(c) {
		return false
	}
	_, err := os.Stat(filepath.Join(cg.dirs[c], file))
	return err == nil
}

// field reads "key value" lines (memory.oom_control, pids.events).
func field(text, key string) int64 {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// write sets a control file to v (nothing where the controller is
// missing).
func (cg *cgroup) write(c, file string, v int64) error {
	if cg.dirs[c] == "" {
		return nil
	}
	f := cg.control(c, file)
	if f == nil {
		return os.WriteFile(filepath.Join(cg.dirs[c], file), []byte(strconv.FormatInt(v, 10)), 0o644)
	}
	_, err := f.WriteAt([]byte(strconv.FormatInt(v, 10)), 0)
	return err
}
