package toolrun

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// The envelope a command tool hands back: its output file, or the last
// JSON object on its stdout.

// readResult prefers the output file, then the last JSON object on stdout.
// The file must be a regular file of at most max bytes: a tool could
// point it at a device or a FIFO.
// The output file read is returned open (the caller closes it): while it
// is, its inode is not reused, so rewriteOutput can tell it from another.
func readResult(dir *os.File, stdout []byte, max int64) ([]byte, string, *os.File, error) {
	// Opened once, beneath the step folder's handle, never through a link,
	// then looked at: what is read is what was checked (a FIFO or device
	// opens without blocking, and is refused; a check by name first left a
	// moment to swap one in).
	f, err := openOutput(dir, os.O_RDONLY)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, "", nil, fmt.Errorf("%s ($CAPFLOW_OUTPUT_PATH) is not a regular file (a symbolic link): refused; write the file itself", OutputFile)
	case errors.Is(err, syscall.ENXIO):
		return nil, "", nil, fmt.Errorf("%s is not a regular file (a socket or a device): refused", OutputFile)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, "", nil, fmt.Errorf("%s cannot be read: %w", OutputFile, err)
	case err == nil:
		keep := false
		defer func() {
			if !keep {
				f.Close()
			}
		}()
		st, err := f.Stat()
		switch {
		case err != nil:
			return nil, "", nil, fmt.Errorf("%s: %w", OutputFile, err)
		case !st.Mode().IsRegular():
			return nil, "", nil, fmt.Errorf("%s is not a regular file (%s): refused", OutputFile, st.Mode().Type())
		case st.Size() > max:
			return nil, "", nil, fmt.Errorf("%s is %d bytes, more than the %d allowed", OutputFile, st.Size(), max)
		}
		b, _ := io.ReadAll(io.LimitReader(f, max+1))
		if int64(len(b)) > max {
			return nil, "", nil, fmt.Errorf("%s grew past %d bytes", OutputFile, max)
		}
		if len(bytes.TrimSpace(b)) > 0 {
			keep = true
			return b, OutputFile, f, nil
		}
	}
	if doc := lastJSONObject(stdout); doc != nil {
		return doc, "stdout", nil, nil
	}
	return nil, "", nil, nil
}

// openOutput opens OutputFile beneath dir, the step folder's handle taken
// before the tool ran: never through a link, nor through a folder the tool
// swapped in for the step folder's path meanwhile; a FIFO never blocks.
func openOutput(dir *os.File, flag int) (*os.File, error) {
	return openBeneath(dir, OutputFile, flag|syscall.O_NONBLOCK, 0)
}

// rewriteOutput writes data over the output file read (read, still open)
// beneath dir: only when the name still holds that same regular file, and no
// other name does (a hard link would carry the write elsewhere). Opened
// without truncating, checked, then truncated: a FIFO or another file
// swapped in is never written.
func rewriteOutput(dir, read *os.File, data []byte) {
	was, err := read.Stat()
	if err != nil {
		return
	}
	f, err := openOutput(dir, os.O_WRONLY)
	if err != nil {
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || !os.SameFile(st, was) {
		return
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || sys.Nlink != 1 {
		return
	}
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt(data, 0)
	}
}

// lastJSONObject is the envelope b ends with (after white space): a JSON
// object with a toolId, which tools may print logs before. Its start is
// found in one pass back from its end, matching braces and skipping
// strings, and the object is decoded once. (Decoding from each '{' back
// from the end decoded every object inside the envelope's data: 416 KiB
// nested 2,000 deep took 3.8 s of the worker's CPU, and 8 MiB of small
// objects 1.2 GB of allocations.)
func lastJSONObject(b []byte) []byte {
	b = bytes.TrimSpace(b)
	i := objectStart(b)
	if i < 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b[i:]))
	var v map[string]json.RawMessage
	if err := dec.Decode(&v); err != nil || int(dec.InputOffset()) != len(b)-i {
		return nil
	}
	if _, ok := v["toolId"]; !ok {
		return nil
	}
	return b[i:]
}

// objectStart is where the object b ends with begins: the '{' matching
// its last '}', braces in strings aside; -1 when b does not end with one.
func objectStart(b []byte) int {
	if len(b) == 0 || b[len(b)-1] != '}' {
		return -1
	}
	depth := 0
	for j := len(b) - 1; j >= 0; j-- {
		switch b[j] {
		case '}':
			depth++
		case '{':
			if depth--; depth == 0 {
				return j
			}
		case '"':
			if j = stringStart(b, j); j < 0 {
				return -1
			}
		}
	}
	return -1
}

// stringStart is the opening quote of the string whose closing quote is
// b[end]: the first quote back from it not escaped (an even number of
// backslashes before it); -1 when there is none.
func stringStart(b []byte, end int) int {
	for k := end - 1; k >= 0; k-- {
		if b[k] != '"' {
			continue
		}
		n := 0
		for n < k && b[k-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return k
		}
	}
	return -1
}

// brokenEnvelope is why the text from the last object that names a
// toolId to stdout's end is not JSON (nil where it is, or where none
// starts there): an envelope cut short or mistyped, not one printed
// before other output.
func brokenEnvelope(out []byte) error {
	at := bytes.LastIndex(out, []byte(`"toolId"`))
	start := bytes.LastIndexByte(out[:max(at, 0)], '{')
	if at < 0 || start < 0 {
		return nil
	}
	// The first value there only: one followed by other output is whole.
	var v json.RawMessage
	var syn *json.SyntaxError
	err := json.NewDecoder(bytes.NewReader(out[start:])).Decode(&v)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF // cut short: "unexpected EOF", not "EOF"
	}
	if errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	return nil
}
