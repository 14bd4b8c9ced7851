// Package cache is the result cache (docs/cache.md): a step of an
// idempotent tool whose tool, inputs and input files are the same as an
// earlier run's reuses that run's output instead of running the tool.
// Entries are records in the artifact store (cache/<aa>/<key>.json); the
// output they name is stored there by digest and checked before use.
package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/seal"
	"github.com/capflow/capflow/wire"
)

// Parts are what a key is made of.
type Parts struct {
	// Tool is the tool's manifest digest; ToolFiles the digest of its
	// folder (its scripts) or, for a builtin, of the worker's build.
	Tool, ToolFiles string
	// Inputs is the canonical JSON of the evaluated inputs.
	Inputs []byte
	// Files are the input files' digests ("pointer sha256").
	Files []string
}

// Key is a step's cache key.
func Key(p Parts) string {
	h := sha256.New()
	fmt.Fprintf(h, "capflow-cache/1\ntool %s\nfiles %s\ninputs %d\n", p.Tool, p.ToolFiles, len(p.Inputs))
	h.Write(p.Inputs)
	for _, f := range p.Files {
		fmt.Fprintf(h, "\nfile %s", f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Entry is one cached result.
type Entry struct {
	Key  string `json:"key"`
	Tool string `json:"tool"` // name@version
	// Digest is the tool's manifest digest.
	Digest string `json:"digest"`
	// Run and Step computed it (Run is the workflow ID: cached_from).
	Run     string    `json:"run"`
	Step    string    `json:"step"`
	Created time.Time `json:"created"`
	// Envelope is the tool's envelope without its data; the data is the
	// artifact Data (its JSON), checked by digest on every use.
	Envelope  envelope.Envelope `json:"envelope"`
	Data      string            `json:"data_sha256"`
	DataBytes int64             `json:"data_bytes"`
	// Artifacts are the files the data names.
	Artifacts []wire.Artifact `json:"artifacts,omitempty"`
}

// record is an entry as stored: its JSON, exactly, and the worker key's
// HMAC of those bytes (internal/seal). An entry changed outside capflow
// (the store can lie in the project, which tools read) is a miss. The
// seal covers the stored bytes, not a re-encoding of them: JSON does not
// give every value back byte for byte (invalid UTF-8 does not).
type record struct {
	Entry json.RawMessage `json:"entry"`
	Seal  string          `json:"seal"`
}

const sealDomain = "capflow-cache-entry"

// unseal reads a stored record: its entry when its seal holds.
func unseal(raw []byte) (*Entry, string) {
	var r record
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Entry) == 0 {
		return nil, "its entry is unreadable"
	}
	if !seal.Check(sealDomain, r.Entry, r.Seal) {
		return nil, "its entry's seal does not hold (written outside capflow, or by a worker with another key): not used"
	}
	var e Entry
	if err := json.Unmarshal(r.Entry, &e); err != nil {
		return nil, "its entry is unreadable"
	}
	return &e, ""
}

// Age is how old the entry is at now.
func (e *Entry) Age(now time.Time) time.Duration { return now.Sub(e.Created) }

// Cache is the cache in an artifact store.
type Cache struct{ Store *artifacts.Store }

const prefix = "cache/"

var keyRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Name is where an entry lives in the store.
func Name(key string) string { return prefix + key[:2] + "/" + key + ".json" }

// MaxEntry bounds an entry read back.
const MaxEntry = 4 << 20

// Lookup returns the entry of key when one no older than ttl exists; a
// miss returns nil and says why.
func (c Cache) Lookup(ctx context.Context, key string, ttl time.Duration, now time.Time) (*Entry, string, error) {
	raw, err := c.Store.GetRecord(ctx, Name(key), MaxEntry)
	if caperr.CodeOf(err) == caperr.ObservabilityError {
		return nil, "no entry", nil
	}
	if err != nil {
		return nil, "", err
	}
	e, why := unseal(raw)
	if e == nil {
		return nil, why, nil
	}
	if e.Key != key {
		return nil, "its entry is not this key's", nil
	}
	if age := e.Age(now); age > ttl {
		return nil, fmt.Sprintf("the entry is %s old, past the step's ttl %s", age.Round(time.Second), ttl), nil
	}
	return e, "", nil
}

// Save writes an entry (its data and files already in the store). Two
// runs saving the same key write equivalent entries: the later wins whole.
func (c Cache) Save(ctx context.Context, e Entry) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	rec, err := json.Marshal(record{Entry: raw, Seal: seal.Of(sealDomain, raw)})
	if err != nil {
		return err
	}
	return c.Store.PutRecord(ctx, Name(e.Key), rec)
}

// List reads every entry, newest first. Unreadable entries are skipped.
func (c Cache) List(ctx context.Context) ([]Entry, error) {
	recs, err := c.Store.Records(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := []Entry{}
	for _, r := range recs {
		raw, err := c.Store.GetRecord(ctx, r.Name, MaxEntry)
		if err != nil {
			continue // purged meanwhile
		}
		// Unsealed entries are listed too (purge removes them); a hit
		// never uses one.
		var rec record
		var e Entry
		if json.Unmarshal(raw, &rec) == nil && json.Unmarshal(rec.Entry, &e) == nil && keyRE.MatchString(e.Key) && Name(e.Key) == r.Name {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// Find returns the entry whose key is key or starts with it (at least 6
// hex digits, and only one such entry).
func (c Cache) Find(ctx context.Context, key string) (*Entry, error) {
	if len(key) < 6 || !regexp.MustCompile(`^[0-9a-f]+$`).MatchString(key) {
		return nil, caperr.New(caperr.InvalidInput, "%q is not a cache key (64 hex digits, or a prefix of at least 6)", key)
	}
	all, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	var found []Entry
	for _, e := range all {
		if strings.HasPrefix(e.Key, key) {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 0:
		return nil, caperr.New(caperr.InvalidInput, "no cache entry %s in %s", key, c.Store.Where)
	case 1:
		return &found[0], nil
	}
	return nil, caperr.New(caperr.InvalidInput, "%d cache entries start with %s: give more of the key", len(found), key)
}

// Purge deletes the entries older than olderThan (0: every entry) and
// returns them. The artifacts they name stay: runs may name them too.
func (c Cache) Purge(ctx context.Context, olderThan time.Duration, now time.Time) ([]Entry, error) {
	all, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	out := []Entry{}
	for _, e := range all {
		if olderThan > 0 && e.Age(now) <= olderThan {
			continue
		}
		if err := c.Store.DeleteRecord(ctx, Name(e.Key)); err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}
