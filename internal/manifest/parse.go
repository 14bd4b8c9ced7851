package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/yamldoc"
	"github.com/capflow/capflow/schemas"
)

// Digest is the content address recorded for a manifest.
func Digest(data []byte) string {
	s := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(s[:])
}

// problemsFromViolations maps schema violations (paths relative to base)
// to positioned problems.
func problemsFromViolations(doc *yamldoc.Doc, base []string, vs []schema.Violation, prefix string) caperr.Problems {
	var out caperr.Problems
	for _, v := range vs {
		full := append(append([]string(nil), base...), v.Path...)
		p := doc.Root.PosOf(full)
		out = append(out, caperr.New(caperr.InvalidInput, "%s%s", prefix, v.Message).At(doc.File, p.Line, p.Column, yamldoc.FieldPath(full)))
	}
	return out
}

// Options of ParseWith.
type Options struct {
	// Protected are more project paths (relative to its root) no
	// sandbox.write may name, beyond the default Protected: the project's
	// configured state, runs, tools and kits folders, policy and rules
	// (config.Config.Protected).
	Protected []string
}

// Parse validates one tool.yaml. file is the path shown in messages; dir
// is the tool's folder. On any problem the manifest is nil.
func Parse(file, dir string, data []byte) (*Manifest, caperr.Problems) {
	return ParseWith(file, dir, data, Options{})
}

// ParseWith is Parse with the project's own protected paths.
func ParseWith(file, dir string, data []byte, o Options) (*Manifest, caperr.Problems) {
	doc, err := yamldoc.Parse(file, data)
	if err != nil {
		return nil, caperr.Problems{err.(*caperr.Error)}
	}
	if doc.Root.Kind != yamldoc.Map {
		return nil, caperr.Problems{caperr.New(caperr.InvalidInput, "a tool manifest must be a YAML mapping").At(file, doc.Root.Pos.Line, doc.Root.Pos.Column, "")}
	}
	raw := doc.Root.Interface()
	sch := schema.Embedded("tool-manifest.schema.json", schemas.Must("tool-manifest.schema.json"))
	probs := problemsFromViolations(doc, nil, sch.Validate(raw), "")
	probs = append(probs, semanticChecks(doc, raw.(map[string]any), o)...)
	if len(probs) > 0 {
		probs.Sort()
		return nil, probs
	}
	b, _ := json.Marshal(raw)
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		// The schema admitted something the struct cannot hold: report it
		// rather than crash, at the top of the file.
		return nil, caperr.Problems{caperr.New(caperr.InvalidInput, "cannot read manifest: %v", err).At(file, 1, 1, "")}
	}
	if m.Stability == "" {
		m.Stability = "stable"
	}
	if m.Execution == "" {
		m.Execution = ExecAuto
	}
	if m.Entrypoint.Type == EntryCommand && m.Entrypoint.Result == "" {
		m.Entrypoint.Result = ResultEnvelope
	}
	if m.Entrypoint.Type == EntryHTTP && m.Entrypoint.Method == "" {
		m.Entrypoint.Method = "POST"
	}
	m.Dir, m.File, m.Digest = dir, file, Digest(data)
	m.Line = doc.Root.KeyPos("name").Line
	return &m, nil
}

// Declared is what a manifest's capabilities field names, read from its
// YAML alone: what a manifest left out for its problems would have
// provided, so a plan that needs it is told to fix that file rather
// than to write a new tool.
func Declared(file string, data []byte) []string {
	// Leniently: a key written twice is a common way to break one.
	doc, err := yamldoc.ParseLenient(file, data)
	if err != nil || doc.Root.Kind != yamldoc.Map {
		return nil
	}
	raw, _ := doc.Root.Interface().(map[string]any)
	list, _ := raw["capabilities"].([]any)
	var out []string
	for _, c := range list {
		if s, ok := c.(string); ok && ValidCapability(s) {
			out = append(out, s)
		}
	}
	return out
}

func semanticChecks(doc *yamldoc.Doc, raw map[string]any, o Options) caperr.Problems {
	var probs caperr.Problems
	at := func(path []string, format string, args ...any) {
		p := doc.Root.PosOf(path)
		probs = append(probs, caperr.New(caperr.InvalidInput, format, args...).At(doc.File, p.Line, p.Column, yamldoc.FieldPath(path)))
	}
	if x, _ := raw["execution"].(string); x == ExecLocal || x == ExecInline {
		if idem, _ := raw["idempotent"].(bool); !idem {
			at([]string{"execution"}, "%s needs idempotent: true (a local activity runs again when its worker dies mid-step)", x)
		}
		if q, _ := raw["task_queue"].(string); q != "" {
			at([]string{"execution"}, "%s cannot go with task_queue %q: a local activity runs on the worker that runs the workflow", x, q)
		}
		if _, limited := raw["limits"]; limited {
			at([]string{"execution"}, "%s cannot go with limits: a slot is leased to a regular activity, which heartbeats (execution: activity or auto)", x)
		}
		if ep, _ := raw["entrypoint"].(map[string]any); x == ExecInline && ep != nil && ep["type"] != EntryBuiltin && ep["type"] != EntryCommand {
			at([]string{"execution"}, "inline is for builtins and commands (run a batch at a time in one local activity, a few milliseconds each at most); use local for a %v tool", ep["type"])
		}
	}
	sandboxChecks(raw, at, append(slices.Clone(Protected), o.Protected...))
	limitsChecks(raw, at)
	if v, ok := raw["version"].(string); ok && !ValidVersion(v) {
		at([]string{"version"}, "version %q is not semver (MAJOR.MINOR.PATCH, e.g. 1.2.0)", v)
	}
	if caps, ok := raw["capabilities"].([]any); ok {
		seen := map[string]bool{}
		for i, c := range caps {
			s, ok := c.(string)
			if !ok {
				continue
			}
			idx := fmt.Sprint(i)
			if seen[s] {
				at([]string{"capabilities", idx}, "capability %q is listed twice", s)
			}
			seen[s] = true
		}
	}
	for _, key := range []string{"input_schema", "output_schema"} {
		s, ok := raw[key].(map[string]any)
		if !ok {
			continue
		}
		if _, vs := schema.Compile(s); len(vs) > 0 {
			probs = append(probs, problemsFromViolations(doc, []string{key}, vs, "not a valid JSON Schema 2020-12: ")...)
		}
	}
	if ep, ok := raw["entrypoint"].(map[string]any); ok {
		typ, _ := ep["type"].(string)
		need := map[string]string{EntryCommand: "command", EntryHTTP: "url", EntryBuiltin: "name", EntryMCP: "server"}
		if _, has := ep["tool"]; typ == EntryMCP && !has {
			at([]string{"entrypoint"}, "entrypoint of type mcp needs \"tool\" (the tool's name on the server)")
		}
		if f, ok := need[typ]; ok {
			if _, has := ep[f]; !has {
				at([]string{"entrypoint"}, "entrypoint of type %s needs %q", typ, f)
			}
			for other, of := range need {
				if other != typ {
					if _, has := ep[of]; has {
						at([]string{"entrypoint", of}, "%q belongs to entrypoint type %s, not %s", of, other, typ)
					}
				}
			}
		}
		if cmd, ok := ep["command"].([]any); ok && len(cmd) > 0 {
			if s, ok := cmd[0].(string); ok && strings.ContainsAny(s, " \t|;&$`") && !strings.Contains(s, "/") {
				at([]string{"entrypoint", "command", "0"}, "command is an argv list and never runs through a shell; split %q into separate items", s)
			}
			if s, ok := cmd[0].(string); ok && !path.IsAbs(s) && strings.HasPrefix(s, "../") {
				at([]string{"entrypoint", "command", "0"}, "command %q leaves the tool's folder", s)
			}
		}
		if _, has := ep["result"]; has && typ != EntryCommand {
			at([]string{"entrypoint", "result"}, "result applies to command tools only")
		}
	}
	if deps, ok := raw["dependencies"].([]any); ok {
		for i, d := range deps {
			dm, _ := d.(map[string]any)
			if dm == nil {
				continue
			}
			if dm["kind"] == DepService && dm["url"] == nil {
				at([]string{"dependencies", fmt.Sprint(i)}, "a service dependency needs a url to check")
			}
			if dm["kind"] != DepService && dm["url"] != nil {
				at([]string{"dependencies", fmt.Sprint(i), "url"}, "url applies to service dependencies only")
			}
		}
	}
	return probs
}
