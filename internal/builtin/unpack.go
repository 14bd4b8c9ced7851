package builtin

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"io"
	"io/fs"
	"os"

	"github.com/capflow/capflow/internal/caperr"
)

type entryWriter func(name string, mode fs.FileMode, r io.Reader) error

// unzipEntries writes a zip's regular files; the rest is skipped, said.
func unzipEntries(f *os.File, skipped *skips, write entryWriter) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(f, st.Size())
	if err != nil {
		return caperr.Wrap(caperr.InvalidInput, err, "open the archive")
	}
	for _, zf := range zr.File {
		if zf.FileInfo().IsDir() {
			continue
		}
		if !zf.Mode().IsRegular() {
			skipped.add(zf.Name, modeName(zf.Mode()), "not extracted: only regular files (and their folders) are; a link could lead outside dest")
			continue
		}
		r, err := zf.Open()
		if err != nil {
			return caperr.Wrap(caperr.InvalidInput, err, "read %s", zf.Name)
		}
		err = write(zf.Name, zf.Mode(), r)
		r.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// untarEntries writes a tar.gz's regular files; the rest is skipped, said.
func untarEntries(f *os.File, skipped *skips, write entryWriter) error {
	gz, err := gzip.NewReader(f)
	if err != nil {
		return caperr.Wrap(caperr.InvalidInput, err, "the archive is not gzip")
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return caperr.Wrap(caperr.InvalidInput, err, "read tar")
		}
		if h.Typeflag != tar.TypeReg {
			skipped.addTar(h)
			continue
		}
		if err := write(h.Name, fs.FileMode(h.Mode), tr); err != nil {
			return err
		}
	}
}
