package step

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/buildinfo"
	"github.com/capflow/capflow/internal/cache"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/sandbox"
	"github.com/capflow/capflow/internal/wfapi"
)

// The result cache (docs/cache.md): a step whose tool and inputs were seen
// before reuses the stored output; a step that ran stores its output for
// the next run.

// MaxArtifact bounds a file fetched from the store.
const MaxArtifact = 64 << 30

// cacheKey is the step's key, or why it has none (an input file that
// cannot be read, a tool folder too large to digest).
func (e *Executor) cacheKey(m *manifest.Manifest, rawIn []byte, inputs any) (string, string) {
	files, why := e.inputFiles(m, inputs)
	if why != "" {
		return "", why
	}
	tool, err := e.toolFiles(m)
	if err != nil {
		return "", "its tool's folder cannot be digested: " + err.Error()
	}
	return cache.Key(cache.Parts{Tool: m.Digest, ToolFiles: tool, Inputs: rawIn, Files: files}), ""
}

// inputFiles digests the files the inputs name (fields the input schema
// marks as paths); a relative path is the project's.
func (e *Executor) inputFiles(m *manifest.Manifest, inputs any) ([]string, string) {
	fields, err := cache.Paths(m.InputSchema, inputs)
	if err != nil {
		return nil, "its inputs hold " + err.Error()
	}
	var out []string
	for _, f := range fields {
		p := f.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(e.Project.Root(), p)
		}
		sum, _, err := e.digests.Digest(p)
		switch {
		case os.IsNotExist(err):
			sum = "absent"
		case err != nil:
			return nil, fmt.Sprintf("input %s (%s) cannot be digested: %v", f.Pointer, f.Path, err)
		}
		out = append(out, f.Pointer+" "+sum)
	}
	return out, ""
}

var buildDigest = sync.OnceValue(func() string {
	s := buildinfo.Stamp()
	if s == "" {
		return "unknown"
	}
	return artifacts.Digest([]byte(s))
})

// toolFiles digests what a tool runs: a command tool's folder (its
// scripts); a builtin is the worker's own build; an MCP tool is its
// server's configuration (the server's code is not capflow's to digest).
func (e *Executor) toolFiles(m *manifest.Manifest) (string, error) {
	if m.Entrypoint.Type == manifest.EntryMCP {
		b, _ := json.Marshal(e.Project.Config.MCPServers[m.Entrypoint.Server])
		return "mcp " + artifacts.Digest(b), nil
	}
	if m.Entrypoint.Type == manifest.EntryBuiltin || m.Dir == "" {
		return "build " + buildDigest(), nil
	}
	if st, err := os.Stat(m.Dir); err != nil || !st.IsDir() {
		return "build " + buildDigest(), nil
	}
	sum, _, err := e.digests.Digest(m.Dir)
	return sum, err
}

// fromCache answers the step from the cache when an entry of its key no
// older than its TTL is there and its output checks out; nil runs the
// tool (the log and feedback say why).
func (e *Executor) fromCache(ctx context.Context, r *stepRun, key string) (*wfapi.RunToolResult, *envelope.Feedback) {
	c := cache.Cache{Store: e.Artifacts}
	now := time.Now()
	ent, why, err := c.Lookup(ctx, key, r.in.Step.CacheTTL, now)
	if err != nil {
		why = "the cache cannot be read: " + err.Error()
	}
	var data any
	var arts []wfapi.Artifact
	if ent != nil {
		data, arts, err = e.restore(ctx, ent, r.stepDir)
		if err != nil {
			why = "its cached output failed its check: " + err.Error()
		}
	}
	if why != "" {
		r.log.Info("cache miss", "key", key[:12], "why", why)
		return nil, &envelope.Feedback{Phase: "cache", Level: envelope.LevelInfo, Message: "cache miss (" + key[:12] + "): " + why, Timestamp: envelope.Timestamp(envelope.Now())}
	}
	env := ent.Envelope
	env.Data = data
	env.Feedback = append(append([]envelope.Feedback(nil), env.Feedback...), envelope.Feedback{Phase: "cache", Level: envelope.LevelInfo,
		Message:   fmt.Sprintf("cached result of %s (key %s, %s old): no tool ran", ent.Run, key[:12], ent.Age(now).Round(time.Second)),
		Timestamp: envelope.Timestamp(envelope.Now())})
	res := &wfapi.RunToolResult{Envelope: env, Attempt: r.attempt, CacheKey: key, CachedFrom: ent.Run, Artifacts: arts}
	if raw, _ := json.Marshal(data); len(raw) > MaxDataInHistory {
		storeData(res, r.stepDir, raw)
	}
	if r.in.Step.Item == nil {
		res.EnvelopeFile = storeEnvelope(r.stepDir, res.Envelope)
	}
	fit(res, r.stepDir, r.recDir)
	r.log.Info("cache hit", "key", key[:12], "from", ent.Run)
	return res, nil
}

// restore reads an entry's data and files back (each checked against its
// digest) into the step folder, and the data names them there: never to a
// path the entry or the inputs name (a hit writes nowhere else).
func (e *Executor) restore(ctx context.Context, ent *cache.Entry, stepDir string) (any, []wfapi.Artifact, error) {
	raw, err := e.Artifacts.Get(ctx, ent.Data, MaxStoredData)
	if err != nil {
		return nil, nil, err
	}
	var data any
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, nil, err
	}
	var out []wfapi.Artifact
	names := artifactNames(ent.Artifacts)
	// A file the data names many times is fetched once: each name of it
	// wrote it again (1,000 names of one 8 MiB file, 8 GB; found
	// reviewing issue 57).
	fetched := map[string]string{}
	for i, art := range ent.Artifacts {
		dest, ok := fetched[art.SHA256]
		if !ok {
			rel := filepath.Join("artifacts", names[i])
			if err := e.Artifacts.Fetch(ctx, art.SHA256, stepDir, rel, MaxArtifact); err != nil {
				return nil, nil, err
			}
			dest = filepath.Join(stepDir, rel)
			fetched[art.SHA256] = dest
		}
		cache.Set(data, art.Pointer, dest)
		art.Path = dest
		out = append(out, art)
	}
	return data, out, nil
}

// toCache stores a step's result under its key: its data (and files,
// already stored with it) by digest, then the entry. A cache that cannot
// take it costs the next run a miss, not this step.
func (e *Executor) toCache(ctx context.Context, r *stepRun, key string, m *manifest.Manifest, env envelope.Envelope, arts []wfapi.Artifact) *envelope.Feedback {
	raw, err := json.Marshal(env.Data)
	var sum string
	if err == nil {
		sum, err = e.Artifacts.Put(ctx, raw)
	}
	if err == nil {
		env.Data, env.Feedback = nil, nil
		err = cache.Cache{Store: e.Artifacts}.Save(ctx, cache.Entry{Key: key, Tool: m.Name + "@" + m.Version, Digest: m.Digest,
			Run: r.in.WorkflowID, Step: r.in.Step.ID, Created: time.Now().UTC(), Envelope: env, Data: sum, DataBytes: int64(len(raw)), Artifacts: arts})
	}
	if err != nil {
		r.log.Warn("not cached", "key", key[:12], "error", err.Error())
		return &envelope.Feedback{Phase: "cache", Level: envelope.LevelWarning, Message: "not cached: " + err.Error(), Timestamp: envelope.Timestamp(envelope.Now())}
	}
	return &envelope.Feedback{Phase: "cache", Level: envelope.LevelInfo, Message: "cached as " + key[:12], Timestamp: envelope.Timestamp(envelope.Now())}
}

// outputFiles checks the files a succeeded step's data names (fields its
// output schema marks as paths; a relative path is the project's, the
// tools' working directory): each lies in the step folder or one of the
// manifest's write: folders and is opened beneath it, so an absolute path
// elsewhere, a ".." or a link leading out fails the step INVALID_INPUT
// naming the field, and nothing of it is read. With store, each regular
// file goes to the artifact store (another host or a later run reads it).
func (e *Executor) outputFiles(ctx context.Context, m *manifest.Manifest, data any, stepDir string, folders sandbox.Folders, store bool) ([]wfapi.Artifact, error) {
	fields, err := cache.Paths(m.OutputSchema, data)
	if err != nil {
		return nil, caperr.New(caperr.InvalidInput, "its data holds %s", err)
	}
	if len(fields) == 0 {
		return nil, nil
	}
	step, err := os.OpenRoot(stepDir)
	switch {
	case err == nil:
		defer step.Close()
	case !errors.Is(err, fs.ErrNotExist): // none: nothing is named there
		return nil, caperr.Wrap(caperr.ObservabilityError, err, "the step folder")
	}
	roots := e.outputRoots(stepDir, step, folders)
	var out []wfapi.Artifact
	// A file named again, by any spelling or link, is checked and stored
	// once: each name read the whole file (8 MiB named 500 times: 4 GB
	// read; 1,000 spellings or hard links of one: 8 GB; found attacking
	// issue 57).
	seen := stored{byName: map[string]*wfapi.Artifact{}, byFile: map[fileID]*wfapi.Artifact{}}
	for _, f := range fields {
		name := e.absolute(f.Path)
		art, ok := seen.byName[name]
		if !ok {
			var err error
			if art, err = e.outputFile(ctx, roots, f, store, &seen); err != nil {
				return nil, err
			}
			seen.byName[name] = art
		}
		if art != nil {
			again := *art
			again.Pointer = f.Pointer
			out = append(out, again)
		}
	}
	return out, nil
}

// stored is what a step's output files made so far: by the name each was
// given, cleaned, and by the file itself.
type stored struct {
	byName map[string]*wfapi.Artifact
	byFile map[fileID]*wfapi.Artifact
}

// fileID is a file, whatever its names.
type fileID struct{ dev, ino uint64 }

func idOf(st fs.FileInfo) (fileID, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{uint64(s.Dev), s.Ino}, true
}

// absolute is a path a tool's data gives, cleaned: a relative one is the
// project's.
func (e *Executor) absolute(p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(e.Project.Root(), p)
	}
	return filepath.Clean(p)
}

// outputRoot is a folder a step's output files may lie in, by the names a
// tool writes it under, and its handle.
type outputRoot struct {
	names []string
	root  *os.Root
}

// outputRoots are the folders a step's output files may lie in: its step
// folder and its manifest's write: folders (in the project), each by the
// name the manifest gives it and where it was when opened.
func (e *Executor) outputRoots(stepDir string, step *os.Root, folders sandbox.Folders) []outputRoot {
	roots := []outputRoot{{names: []string{stepDir}, root: step}}
	for _, f := range folders {
		roots = append(roots, outputRoot{names: []string{filepath.Join(e.Project.Root(), f.Name), f.Real}, root: f.Root})
	}
	return roots
}

// stillThere: the folder named name is the one root was opened on (a
// folder swapped for a link while the tool ran is not).
func stillThere(root *os.Root, name string) error {
	if root == nil {
		return nil
	}
	held, err := root.Stat(".")
	if err != nil {
		return err
	}
	now, err := os.Stat(name)
	if err != nil || !os.SameFile(held, now) {
		to, _ := filepath.EvalSymlinks(name)
		return fmt.Errorf("%s was replaced while the step ran (it now leads to %q)", name, to)
	}
	return nil
}

// outputFile checks (and, with store, stores) one output file; a folder,
// or nothing at that name, is no artifact. It is opened beneath the
// handle its folder was opened with before the tool started.
func (e *Executor) outputFile(ctx context.Context, roots []outputRoot, f cache.PathField, store bool, seen *stored) (*wfapi.Artifact, error) {
	field := "output " + f.Pointer
	p := e.absolute(f.Path)
	// The deepest folder that holds the path (out/deep before out).
	var dir *os.Root
	name, rel, found := "", "", false
	for _, r := range roots {
		if n, x, ok := beneath.Pick(r.names, p); ok && len(n) > len(name) {
			dir, name, rel, found = r.root, n, x, true
		}
	}
	if found {
		if err := stillThere(dir, name); err != nil {
			return nil, caperr.New(caperr.InvalidInput, "%s %q leads outside its folder: %v", field, f.Path, err)
		}
	}
	if !found {
		return nil, caperr.New(caperr.InvalidInput, "%s %q is outside the step folder and the tool's sandbox write: folders", field, f.Path)
	}
	if dir == nil {
		return nil, nil // in a step folder that was never made
	}
	st, err := dir.Stat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, beneath.Refusal(err, caperr.ObservabilityError, field, f.Path)
	case !store || !st.Mode().IsRegular():
		return nil, nil
	}
	file, fst, err := beneath.OpenRegular(dir, rel, field, f.Path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	id, ok := idOf(fst)
	if art := seen.byFile[id]; ok && art != nil {
		return &wfapi.Artifact{Pointer: f.Pointer, Path: p, SHA256: art.SHA256, Bytes: art.Bytes}, nil
	}
	sum, n, err := e.Artifacts.PutOpened(ctx, file, p)
	if err != nil {
		return nil, err
	}
	art := &wfapi.Artifact{Pointer: f.Pointer, Path: p, SHA256: sum, Bytes: n}
	if ok {
		seen.byFile[id] = art
	}
	return art, nil
}

// artifactNames are the names files named by arts take in a step folder's
// artifacts/: each one's base name, numbered where two would be the same
// (out/a/r.txt and out/b/r.txt).
func artifactNames(arts []wfapi.Artifact) []string {
	out := make([]string, len(arts))
	used := map[string]bool{}
	for i, art := range arts {
		name := filepath.Base(filepath.Clean("/" + art.Path))
		if name == "/" || used[name] {
			name = fmt.Sprintf("%d-%s", i, strings.Trim(name, "/"))
		}
		used[name] = true
		out[i] = name
	}
	return out
}
