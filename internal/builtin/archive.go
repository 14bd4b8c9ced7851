package builtin

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
)

func init() {
	register("archive.create", archiveCreate)
	register("archive.extract", archiveExtract)
}

// maxExtract bounds what one archive may expand to (zip bombs).
const maxExtract = 2 << 30

func archiveFormat(in map[string]any, name string) (string, error) {
	f := str(in, "format")
	if f == "" {
		switch {
		case strings.HasSuffix(name, ".zip"):
			f = "zip"
		case strings.HasSuffix(name, ".tar.gz"), strings.HasSuffix(name, ".tgz"):
			f = "tar.gz"
		default:
			return "", caperr.New(caperr.InvalidInput, "cannot tell the format of %q: name it .zip or .tar.gz, or set format", name)
		}
	}
	return f, nil
}

func archiveCreate(ctx context.Context, in map[string]any, env *Env) (any, error) {
	src, err := env.Path("source", str(in, "source"))
	if err != nil {
		return nil, err
	}
	out, err := env.Path("output", str(in, "output"))
	if err != nil {
		return nil, err
	}
	format, err := archiveFormat(in, out)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(src)
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "source")
	}
	base := src
	if !st.IsDir() {
		base = filepath.Dir(src)
	}
	var files []string
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == out {
			return nil
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "walk source")
	}
	sort.Strings(files)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, caperr.Wrap(caperr.ToolFailure, err, "create output folder")
	}
	tmp := out + ".partial"
	f, err := os.Create(tmp)
	if err != nil {
		return nil, caperr.Wrap(caperr.ToolFailure, err, "create %s", str(in, "output"))
	}
	defer os.Remove(tmp)
	var names []any
	add := func(w func(name string, info fs.FileInfo, r io.Reader) error) error {
		for _, p := range files {
			if err := ctx.Err(); err != nil {
				return caperr.Wrap(caperr.Cancelled, err, "archive")
			}
			name, _ := filepath.Rel(base, p)
			name = filepath.ToSlash(name)
			info, err := os.Stat(p)
			if err != nil {
				return err
			}
			r, err := os.Open(p)
			if err != nil {
				return err
			}
			err = w(name, info, r)
			r.Close()
			if err != nil {
				return err
			}
			names = append(names, name)
		}
		return nil
	}
	switch format {
	case "zip":
		zw := zip.NewWriter(f)
		err = add(func(name string, info fs.FileInfo, r io.Reader) error {
			h, _ := zip.FileInfoHeader(info)
			h.Name, h.Method = name, zip.Deflate
			w, err := zw.CreateHeader(h)
			if err == nil {
				_, err = io.Copy(w, r)
			}
			return err
		})
		if cerr := zw.Close(); err == nil {
			err = cerr
		}
	case "tar.gz":
		gz := gzip.NewWriter(f)
		tw := tar.NewWriter(gz)
		err = add(func(name string, info fs.FileInfo, r io.Reader) error {
			h, _ := tar.FileInfoHeader(info, "")
			h.Name = name
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			_, err := io.Copy(tw, r)
			return err
		})
		if cerr := tw.Close(); err == nil {
			err = cerr
		}
		if cerr := gz.Close(); err == nil {
			err = cerr
		}
	default:
		err = caperr.New(caperr.InvalidInput, "format %q is not zip or tar.gz", format)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if caperr.CodeOf(err) != caperr.InternalError {
			return nil, err
		}
		return nil, caperr.Wrap(caperr.ToolFailure, err, "write archive")
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, caperr.Wrap(caperr.ToolFailure, err, "finish archive")
	}
	sum, size, _ := sha256File(out)
	env.Feedback.Info("archive", fmt.Sprintf("packed %d files into %s (%s)", len(names), filepath.Base(out), humanBytes(size)))
	if names == nil {
		names = []any{}
	}
	return map[string]any{"path": out, "format": format, "files": names, "count": len(names), "bytes": size, "sha256": sum}, nil
}

func archiveExtract(ctx context.Context, in map[string]any, env *Env) (any, error) {
	src, err := env.Path("archive", str(in, "archive"))
	if err != nil {
		return nil, err
	}
	dest, err := env.Path("dest", str(in, "dest"))
	if err != nil {
		return nil, err
	}
	format, err := archiveFormat(in, src)
	if err != nil {
		return nil, err
	}
	var names []any
	var total int64
	// write refuses entries that would land outside dest (zip slip) and
	// stops at maxExtract bytes.
	write := func(name string, mode fs.FileMode, r io.Reader) error {
		if err := ctx.Err(); err != nil {
			return caperr.Wrap(caperr.Cancelled, err, "extract")
		}
		target := filepath.Join(dest, filepath.FromSlash(name))
		if !within(filepath.Clean(dest), target) {
			return caperr.New(caperr.InvalidInput, "archive entry %q would be written outside %s", name, str(in, "dest"))
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		w, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm()|0o600)
		if err != nil {
			return err
		}
		n, err := io.Copy(w, io.LimitReader(r, maxExtract-total+1))
		w.Close()
		total += n
		if total > maxExtract {
			return caperr.New(caperr.InvalidInput, "archive expands past %s", humanBytes(maxExtract))
		}
		names = append(names, filepath.ToSlash(name))
		return err
	}
	switch format {
	case "zip":
		zr, err := zip.OpenReader(src)
		if err != nil {
			return nil, caperr.Wrap(caperr.InvalidInput, err, "open %s", str(in, "archive"))
		}
		defer zr.Close()
		for _, f := range zr.File {
			if f.FileInfo().IsDir() {
				continue
			}
			r, err := f.Open()
			if err != nil {
				return nil, caperr.Wrap(caperr.InvalidInput, err, "read %s", f.Name)
			}
			err = write(f.Name, f.Mode(), r)
			r.Close()
			if err != nil {
				return nil, asToolErr(err)
			}
		}
	case "tar.gz":
		f, err := os.Open(src)
		if err != nil {
			return nil, caperr.Wrap(caperr.InvalidInput, err, "open %s", str(in, "archive"))
		}
		defer f.Close()
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, caperr.Wrap(caperr.InvalidInput, err, "%s is not gzip", str(in, "archive"))
		}
		tr := tar.NewReader(gz)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, caperr.Wrap(caperr.InvalidInput, err, "read tar")
			}
			if h.Typeflag != tar.TypeReg {
				continue
			}
			if err := write(h.Name, fs.FileMode(h.Mode), tr); err != nil {
				return nil, asToolErr(err)
			}
		}
	default:
		return nil, caperr.New(caperr.InvalidInput, "format %q is not zip or tar.gz", format)
	}
	env.Feedback.Info("extract", fmt.Sprintf("extracted %d files (%s)", len(names), humanBytes(total)))
	if names == nil {
		names = []any{}
	}
	return map[string]any{"dest": dest, "files": names, "count": len(names), "bytes": total}, nil
}

func asToolErr(err error) error {
	if caperr.CodeOf(err) != caperr.InternalError {
		return err
	}
	return caperr.Wrap(caperr.ToolFailure, err, "extract")
}
