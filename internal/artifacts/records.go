package artifacts

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"time"

	"gocloud.dev/blob"

	"github.com/capflow/capflow/internal/caperr"
)

// Records are small named documents beside the artifacts (the cache's
// entries, under "cache/"): unlike artifacts they are found by name, and
// a later write replaces an earlier one whole.

// RecordInfo is one record as a listing shows it.
type RecordInfo struct {
	Name     string
	Size     int64
	Modified time.Time
}

var recordRE = regexp.MustCompile(`^[a-z]+(/[0-9a-zA-Z._~-]+)+$`)

func checkRecord(name string) error {
	if !recordRE.MatchString(name) || strings.Contains(name, "..") {
		return caperr.New(caperr.InvalidInput, "%q is not a record name", name)
	}
	return nil
}

// PutRecord writes a record (replacing one of the same name atomically:
// a reader sees the old bytes or the new, never a mix).
func (s *Store) PutRecord(ctx context.Context, name string, raw []byte) error {
	if err := checkRecord(name); err != nil {
		return err
	}
	if err := s.bucket.WriteAll(ctx, name, raw, &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return s.failRecord(err, name)
	}
	return nil
}

// GetRecord reads a record of at most max bytes.
func (s *Store) GetRecord(ctx context.Context, name string, max int64) ([]byte, error) {
	if err := checkRecord(name); err != nil {
		return nil, err
	}
	r, err := s.bucket.NewReader(ctx, name, nil)
	if err != nil {
		return nil, s.failRecord(err, name)
	}
	defer r.Close()
	if r.Size() > max {
		return nil, caperr.New(caperr.ObservabilityError, "record %s is %d bytes, more than the %d allowed", name, r.Size(), max)
	}
	var b bytes.Buffer
	if _, err := io.Copy(&b, io.LimitReader(r, max)); err != nil {
		return nil, s.failRecord(err, name)
	}
	return b.Bytes(), nil
}

// Records lists the records under prefix ("cache/").
func (s *Store) Records(ctx context.Context, prefix string) ([]RecordInfo, error) {
	var out []RecordInfo
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, s.failRecord(err, prefix)
		}
		if o.IsDir || checkRecord(o.Key) != nil {
			continue // a temporary file of a write under way
		}
		out = append(out, RecordInfo{Name: o.Key, Size: o.Size, Modified: o.ModTime})
	}
}

// DeleteRecord removes a record; one already gone is no error.
func (s *Store) DeleteRecord(ctx context.Context, name string) error {
	if err := checkRecord(name); err != nil {
		return err
	}
	if err := s.bucket.Delete(ctx, name); err != nil && !isNotFound(err) {
		return s.failRecord(err, name)
	}
	return nil
}
