package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// PathField is a value a schema marks as a file: `format: path` or
// `x-capflow-artifact: true`.
type PathField struct {
	Pointer string // JSON pointer in the value
	Path    string
}

// Bounds of Paths: the values one value may name as files, and how long
// each one's pointer may be (a tool chooses the keys). Walking a tool's 8
// MiB of data, building each pointer on the way in and escaping each key
// with a new replacer took 4.5 GB; a pointer under a long key, copied for
// each of many files, terabytes (found attacking issue 57).
const (
	MaxPathFields = 1000
	MaxPointer    = 1 << 10
)

// Paths walks value along schema and returns the strings the schema
// marks as files, in pointer order. Objects follow `properties` and
// `additionalProperties`, arrays `items`; what the schema does not
// describe is not looked at. More than MaxPathFields of them, or a pointer
// past MaxPointer, is an error naming the bound.
func Paths(schema map[string]any, value any) ([]PathField, error) {
	w := pathWalk{}
	w.walk(schema, value)
	if w.err != nil {
		return nil, w.err
	}
	sort.Slice(w.out, func(i, j int) bool { return w.out[i].Pointer < w.out[j].Pointer })
	return w.out, nil
}

// pathWalk is one walk of Paths: the keys and indexes down to the value
// at hand, a pointer made of them only for a value kept.
type pathWalk struct {
	segs []string
	out  []PathField
	err  error
}

func (w *pathWalk) walk(schema map[string]any, value any) {
	if schema == nil || w.err != nil {
		return
	}
	switch v := value.(type) {
	case string:
		if schema["format"] == "path" || schema["x-capflow-artifact"] == true {
			w.keep(v)
		}
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		extra, _ := schema["additionalProperties"].(map[string]any)
		for k, x := range v {
			sub, _ := props[k].(map[string]any)
			if sub == nil {
				sub = extra
			}
			if sub != nil {
				w.segs = append(w.segs, k)
				w.walk(sub, x)
				w.segs = w.segs[:len(w.segs)-1]
			}
		}
	case []any:
		items, _ := schema["items"].(map[string]any)
		if items == nil {
			return
		}
		for i, x := range v {
			w.segs = append(w.segs, strconv.Itoa(i))
			w.walk(items, x)
			w.segs = w.segs[:len(w.segs)-1]
		}
	}
}

func (w *pathWalk) keep(path string) {
	if len(w.out) == MaxPathFields {
		w.err = fmt.Errorf("more than %d values its schema marks as files", MaxPathFields)
		return
	}
	n := 0
	for _, s := range w.segs {
		n += 1 + len(s) + strings.Count(s, "~") + strings.Count(s, "/") // as escaped
	}
	if n > MaxPointer {
		// Which one is the walk's (map) order's: the message names none.
		w.err = fmt.Errorf("a value its schema marks as a file under keys longer than %d bytes together", MaxPointer)
		return
	}
	var b strings.Builder
	for _, s := range w.segs {
		b.WriteByte('/')
		b.WriteString(escape(s))
	}
	w.out = append(w.out, PathField{Pointer: b.String(), Path: path})
}

var escaper = strings.NewReplacer("~", "~0", "/", "~1")

func escape(k string) string { return escaper.Replace(k) }

var unescaper = strings.NewReplacer("~1", "/", "~0", "~")

// Set replaces the string at pointer in value (as Paths found it).
func Set(value any, pointer, s string) bool {
	parts := strings.Split(pointer, "/")[1:]
	for i, p := range parts {
		p = unescaper.Replace(p)
		last := i == len(parts)-1
		switch v := value.(type) {
		case map[string]any:
			if last {
				v[p] = s
				return true
			}
			value = v[p]
		case []any:
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 || n >= len(v) {
				return false
			}
			if last {
				v[n] = s
				return true
			}
			value = v[n]
		default:
			return false
		}
	}
	return false
}

// MaxTreeFiles bounds the files of a folder digested for a key.
const MaxTreeFiles = 10000

// FileDigest is the sha256 of a file, or of a folder's tree (every
// file's relative path and digest, symlinks by target), and its size.
func FileDigest(path string) (string, int64, error) { return (*Memo)(nil).Digest(path) }

// Digest is FileDigest, reading only the files that changed since the
// memo last saw them.
func (m *Memo) Digest(path string) (string, int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", 0, err
	}
	if st.Mode().IsRegular() {
		s, err := m.sum(path, st)
		return s, st.Size(), err
	}
	if !st.IsDir() {
		return "", 0, fmt.Errorf("%s is neither a file nor a folder", path)
	}
	h := sha256.New()
	var total int64
	n := 0
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(path, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			t, _ := os.Readlink(p)
			fmt.Fprintf(h, "L %q %q\n", rel, t)
		case d.Type().IsRegular():
			if n++; n > MaxTreeFiles {
				return fmt.Errorf("%s holds more than %d files", path, MaxTreeFiles)
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			sum, err := m.sum(p, info)
			if err != nil {
				return err
			}
			total += info.Size()
			fmt.Fprintf(h, "F %q %s\n", rel, sum)
		case d.IsDir():
			fmt.Fprintf(h, "D %q\n", rel)
		}
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), total, nil
}

func fileSum(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// Memo remembers file digests by what stat says of the file (device,
// inode, size, modification time), the way git's index does: a file
// digested once is not read again until it changes. Safe for concurrent
// use; the zero value is ready.
type Memo struct {
	mu sync.Mutex
	m  map[memoKey]string
}

type memoKey struct {
	path       string
	dev, ino   uint64
	size, nsec int64
}

// maxMemo bounds the remembered files (past it, the memo starts over).
const maxMemo = 100000

func (m *Memo) sum(path string, st os.FileInfo) (string, error) {
	k := memoKey{path: path, size: st.Size(), nsec: st.ModTime().UnixNano()}
	k.dev, k.ino = fileID(st)
	if m != nil {
		m.mu.Lock()
		s, ok := m.m[k]
		m.mu.Unlock()
		if ok {
			return s, nil
		}
	}
	s, _, err := fileSum(path)
	if err != nil || m == nil {
		return s, err
	}
	m.mu.Lock()
	if m.m == nil || len(m.m) >= maxMemo {
		m.m = map[memoKey]string{}
	}
	m.m[k] = s
	m.mu.Unlock()
	return s, nil
}
