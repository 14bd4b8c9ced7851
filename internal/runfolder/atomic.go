package runfolder

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"
)

// WriteJSON writes v to path atomically, streamed through a buffer (a
// report of 20,000 steps is tens of MB: indenting it would hold it twice).
func WriteJSON(path string, v any, indent bool) error {
	f, err := tempBeside(path)
	if err != nil {
		return err
	}
	tmp := f.Name()
	// 64 KB: a 1 MB buffer, made and cleared for every report, was a fifth
	// of a small run's Finalize.
	w := bufio.NewWriterSize(f, 64<<10)
	enc := json.NewEncoder(w)
	if indent {
		enc.SetIndent("", "  ")
	}
	err = enc.Encode(v)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// WriteAtomic writes data to path through a temporary file beside it:
// a reader sees the old file or the new one, never half of one.
func WriteAtomic(path string, data []byte) error {
	f, err := tempBeside(path)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

// tempBeside creates a new file beside path, of a name no one chose
// (O_EXCL): a link a tool left in a step folder under a name the worker
// writes to is not followed. Rename then replaces path itself, never
// what a link there points to.
func tempBeside(path string) (*os.File, error) {
	for {
		tmp := fmt.Sprintf("%s.tmp-%d-%d", path, os.Getpid(), tempSeq.Add(1))
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
}

// tempSeq numbers this process's temporary files.
var tempSeq atomic.Uint64

// Make makes a run's folder: one mkdir where runs_dir exists (every run
// but a project's first), MkdirAll's look at each parent otherwise or
// where the folder is there already.
func Make(dir string) error {
	if os.Mkdir(dir, 0o755) == nil {
		return nil
	}
	return os.MkdirAll(dir, 0o755)
}
