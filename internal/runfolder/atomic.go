package runfolder

import (
	"bufio"
	"encoding/json"
	"os"
)

// WriteJSON writes v to path atomically, streamed through a buffer (a
// report of 20,000 steps is tens of MB: indenting it would hold it twice).
func WriteJSON(path string, v any, indent bool) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
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
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
