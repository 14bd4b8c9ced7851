package builtin

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/capflow/capflow/internal/caperr"
)

func init() {
	register("file.read", fileRead)
	register("file.write", fileWrite)
	register("file.checksum", fileChecksum)
	register("file.list", fileList)
}

const defaultMaxRead = 1 << 20

func fileRead(_ context.Context, in map[string]any, env *Env) (any, error) {
	p, err := env.Path("path", str(in, "path"))
	if err != nil {
		return nil, err
	}
	max := integer(in, "max_bytes", defaultMaxRead)
	f, err := os.Open(p)
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "cannot read %s", str(in, "path"))
	}
	defer f.Close()
	st, _ := f.Stat()
	if st.IsDir() {
		return nil, caperr.New(caperr.InvalidInput, "%s is a directory", str(in, "path"))
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, caperr.Wrap(caperr.ToolFailure, err, "read %s", str(in, "path"))
	}
	truncated := int64(len(b)) > max
	if truncated {
		b = b[:max]
	}
	enc := str(in, "encoding")
	if enc == "" {
		enc = "text"
	}
	content := string(b)
	if enc == "base64" {
		content = base64.StdEncoding.EncodeToString(b)
	}
	env.Feedback.Info("read", "read "+humanBytes(int64(len(b)))+" from "+str(in, "path"))
	return map[string]any{"path": p, "content": content, "encoding": enc, "size": st.Size(), "truncated": truncated}, nil
}

func fileWrite(_ context.Context, in map[string]any, env *Env) (any, error) {
	p, err := env.Path("path", str(in, "path"))
	if err != nil {
		return nil, err
	}
	data := []byte(str(in, "content"))
	if str(in, "encoding") == "base64" {
		if data, err = base64.StdEncoding.DecodeString(str(in, "content")); err != nil {
			return nil, caperr.Wrap(caperr.InvalidInput, err, "content is not valid base64")
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, caperr.Wrap(caperr.ToolFailure, err, "create folder for %s", str(in, "path"))
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if boolean(in, "append") {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(p, flags, 0o644)
	if err != nil {
		return nil, caperr.Wrap(caperr.ToolFailure, err, "open %s", str(in, "path"))
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, caperr.Wrap(caperr.ToolFailure, err, "write %s", str(in, "path"))
	}
	if err := f.Close(); err != nil {
		return nil, caperr.Wrap(caperr.ToolFailure, err, "close %s", str(in, "path"))
	}
	env.Feedback.Info("write", "wrote "+humanBytes(int64(len(data)))+" to "+str(in, "path"))
	return map[string]any{"path": p, "bytes": len(data)}, nil
}

func sha256File(p string) (string, int64, error) {
	f, err := os.Open(p)
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

func fileChecksum(ctx context.Context, in map[string]any, env *Env) (any, error) {
	p, err := env.Path("path", str(in, "path"))
	if err != nil {
		return nil, err
	}
	sum, n, err := sha256File(p)
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "cannot checksum %s", str(in, "path"))
	}
	env.Feedback.Info("hash", "sha256 of "+humanBytes(n))
	return map[string]any{"path": p, "sha256": sum, "size": n}, nil
}

func fileList(_ context.Context, in map[string]any, env *Env) (any, error) {
	dir, err := env.Path("dir", str(in, "dir"))
	if err != nil {
		return nil, err
	}
	pattern := str(in, "pattern")
	if pattern == "" {
		pattern = "*"
	}
	if _, err := filepath.Match(pattern, ""); err != nil {
		return nil, caperr.New(caperr.InvalidInput, "pattern %q is not a valid glob", pattern)
	}
	recursive := boolean(in, "recursive")
	files := []any{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		if ok, _ := filepath.Match(pattern, d.Name()); ok {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "cannot list %s", str(in, "dir"))
	}
	sort.Slice(files, func(i, j int) bool { return files[i].(string) < files[j].(string) })
	env.Feedback.Info("list", "found "+itoa(len(files))+" files")
	return map[string]any{"dir": dir, "files": files, "count": len(files)}, nil
}
