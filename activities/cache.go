package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/capflow/capflow/internal/artifacts"
	"github.com/capflow/capflow/internal/cache"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/wfapi"
)

// The result cache (docs/cache.md): a step whose tool and inputs were seen
// before reuses the stored output; a step that ran stores its output for
// the next run.

// MaxArtifact bounds a file fetched from the store.
const MaxArtifact = 64 << 30

// cacheKey is the step's key, or why it has none (an input file that
// cannot be read, a tool folder too large to digest).
func (a *Activities) cacheKey(m *manifest.Manifest, rawIn []byte, inputs any) (string, string) {
	files, why := a.inputFiles(m, inputs)
	if why != "" {
		return "", why
	}
	tool, err := a.toolFiles(m)
	if err != nil {
		return "", "its tool's folder cannot be digested: " + err.Error()
	}
	return cache.Key(cache.Parts{Tool: m.Digest, ToolFiles: tool, Inputs: rawIn, Files: files}), ""
}

// inputFiles digests the files the inputs name (fields the input schema
// marks as paths); a relative path is the project's.
func (a *Activities) inputFiles(m *manifest.Manifest, inputs any) ([]string, string) {
	var out []string
	for _, f := range cache.Paths(m.InputSchema, inputs) {
		p := f.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(a.Project.Root(), p)
		}
		sum, _, err := a.digests.Digest(p)
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
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	s := bi.Main.Version
	for _, kv := range bi.Settings {
		if kv.Key == "vcs.revision" || kv.Key == "vcs.modified" {
			s += " " + kv.Value
		}
	}
	return artifacts.Digest([]byte(s))
})

// toolFiles digests what a tool runs: a command tool's folder (its
// scripts); a builtin is the worker's own build; an MCP tool is its
// server's configuration (the server's code is not capflow's to digest).
func (a *Activities) toolFiles(m *manifest.Manifest) (string, error) {
	if m.Entrypoint.Type == manifest.EntryMCP {
		b, _ := json.Marshal(a.Project.Config.MCPServers[m.Entrypoint.Server])
		return "mcp " + artifacts.Digest(b), nil
	}
	if m.Entrypoint.Type == manifest.EntryBuiltin || m.Dir == "" {
		return "build " + buildDigest(), nil
	}
	if st, err := os.Stat(m.Dir); err != nil || !st.IsDir() {
		return "build " + buildDigest(), nil
	}
	sum, _, err := a.digests.Digest(m.Dir)
	return sum, err
}

// fromCache answers the step from the cache when an entry of its key no
// older than its TTL is there and its output checks out; nil runs the
// tool (the log and feedback say why).
func (a *Activities) fromCache(ctx context.Context, r *stepRun, key string, inputs any) (*wfapi.RunToolResult, *envelope.Feedback) {
	c := cache.Cache{Store: a.Artifacts}
	now := time.Now()
	e, why, err := c.Lookup(ctx, key, r.in.Step.CacheTTL, now)
	if err != nil {
		why = "the cache cannot be read: " + err.Error()
	}
	var data any
	var arts []wfapi.Artifact
	if e != nil {
		data, arts, err = a.restore(ctx, e, r.stepDir, inputs)
		if err != nil {
			why = "its cached output failed its check: " + err.Error()
		}
	}
	if why != "" {
		r.log.Info("cache miss", "key", key[:12], "why", why)
		return nil, &envelope.Feedback{Phase: "cache", Level: envelope.LevelInfo, Message: "cache miss (" + key[:12] + "): " + why, Timestamp: envelope.Timestamp(envelope.Now())}
	}
	env := e.Envelope
	env.Data = data
	env.Feedback = append(append([]envelope.Feedback(nil), env.Feedback...), envelope.Feedback{Phase: "cache", Level: envelope.LevelInfo,
		Message:   fmt.Sprintf("cached result of %s (key %s, %s old): no tool ran", e.Run, key[:12], e.Age(now).Round(time.Second)),
		Timestamp: envelope.Timestamp(envelope.Now())})
	res := &wfapi.RunToolResult{Envelope: env, Attempt: r.attempt, CacheKey: key, CachedFrom: e.Run, Artifacts: arts}
	if raw, _ := json.Marshal(data); len(raw) > MaxInlineData {
		storeData(res, r.stepDir, raw)
	}
	if r.in.Step.Item == nil {
		res.EnvelopeFile = storeEnvelope(r.stepDir, res.Envelope)
	}
	fit(res, r.stepDir)
	r.log.Info("cache hit", "key", key[:12], "from", e.Run)
	return res, nil
}

// restore reads an entry's data and files back (each checked against its
// digest): files go into the step folder, or back where the inputs asked
// the tool to write them, and the data names them there.
func (a *Activities) restore(ctx context.Context, e *cache.Entry, stepDir string, inputs any) (any, []wfapi.Artifact, error) {
	raw, err := a.Artifacts.Get(ctx, e.Data, MaxStoredData)
	if err != nil {
		return nil, nil, err
	}
	var data any
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, nil, err
	}
	asked := map[string]bool{}
	collectStrings(inputs, asked)
	var out []wfapi.Artifact
	used := map[string]bool{}
	for i, art := range e.Artifacts {
		name := filepath.Base(art.Path)
		if used[name] {
			name = fmt.Sprintf("%d-%s", i, name)
		}
		used[name] = true
		dest := filepath.Join(stepDir, "artifacts", name)
		if asked[art.Path] && filepath.IsAbs(art.Path) {
			dest = art.Path // the inputs named it: the tool would write it there
		}
		if err := a.Artifacts.Fetch(ctx, art.SHA256, dest, MaxArtifact); err != nil {
			return nil, nil, err
		}
		cache.Set(data, art.Pointer, dest)
		art.Path = dest
		out = append(out, art)
	}
	return data, out, nil
}

// collectStrings gathers the strings of a value.
func collectStrings(v any, into map[string]bool) {
	switch x := v.(type) {
	case string:
		into[x] = true
	case map[string]any:
		for _, y := range x {
			collectStrings(y, into)
		}
	case []any:
		for _, y := range x {
			collectStrings(y, into)
		}
	}
}

// toCache stores a step's result under its key: its data (and files,
// already stored with it) by digest, then the entry. A cache that cannot
// take it costs the next run a miss, not this step.
func (a *Activities) toCache(ctx context.Context, r *stepRun, key string, m *manifest.Manifest, env envelope.Envelope, arts []wfapi.Artifact) *envelope.Feedback {
	raw, err := json.Marshal(env.Data)
	var sum string
	if err == nil {
		sum, err = a.Artifacts.Put(ctx, raw)
	}
	if err == nil {
		env.Data, env.Feedback = nil, nil
		err = cache.Cache{Store: a.Artifacts}.Save(ctx, cache.Entry{Key: key, Tool: m.Name + "@" + m.Version, Digest: m.Digest,
			Run: r.in.WorkflowID, Step: r.in.Step.ID, Created: time.Now().UTC(), Envelope: env, Data: sum, DataBytes: int64(len(raw)), Artifacts: arts})
	}
	if err != nil {
		r.log.Warn("not cached", "key", key[:12], "error", err.Error())
		return &envelope.Feedback{Phase: "cache", Level: envelope.LevelWarning, Message: "not cached: " + err.Error(), Timestamp: envelope.Timestamp(envelope.Now())}
	}
	return &envelope.Feedback{Phase: "cache", Level: envelope.LevelInfo, Message: "cached as " + key[:12], Timestamp: envelope.Timestamp(envelope.Now())}
}

// outputFiles stores the files a succeeded step's data names (fields its
// output schema marks as paths; a relative path is the project's, the
// tools' working directory) when another host or a later run may read
// them: with a shared store, or for the cache.
func (a *Activities) outputFiles(ctx context.Context, m *manifest.Manifest, data any) ([]wfapi.Artifact, error) {
	var out []wfapi.Artifact
	for _, f := range cache.Paths(m.OutputSchema, data) {
		p := f.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(a.Project.Root(), p)
		}
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			continue // a folder, or nothing: read by path as before
		}
		sum, n, err := a.Artifacts.PutFile(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, wfapi.Artifact{Pointer: f.Pointer, Path: p, SHA256: sum, Bytes: n})
	}
	return out, nil
}
