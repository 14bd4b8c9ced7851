package cli

import (
	"fmt"
	"io/fs"
	"net/url"
	"slices"
	"strings"

	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/suggest"
	"github.com/capflow/capflow/internal/yamldoc"
	"github.com/capflow/capflow/kits"
)

// schemaFile reads a JSON Schema a tool is scaffolded with (nil for no
// file): YAML or JSON, an object that compiles, each fault at its line.
func schemaFile(path string) (map[string]any, error) {
	if path == "" {
		return nil, nil
	}
	doc, err := yamldoc.ParseFile(path, path)
	if err != nil {
		return nil, err
	}
	m, ok := doc.Root.Interface().(map[string]any)
	if !ok {
		return nil, caperr.New(caperr.InvalidInput, "a JSON Schema is an object (type: object, properties: ...), and this file holds none").At(path, doc.Root.Pos.Line, doc.Root.Pos.Column, "")
	}
	if _, vs := schema.Compile(m); len(vs) > 0 {
		var probs caperr.Problems
		for _, v := range vs {
			at := doc.Root.PosOf(v.Path)
			probs = append(probs, caperr.New(caperr.InvalidInput, "not a valid JSON Schema: %s", v.Message).At(path, at.Line, at.Column, yamldoc.FieldPath(v.Path)))
		}
		return nil, probs
	}
	return m, nil
}

// checkEntrypoint says what an entrypoint lacks: an http tool's URL, a
// builtin tool's builtin (its capability's name when a builtin has it).
func (s *scaffoldSpec) checkEntrypoint() error {
	switch s.Entrypoint {
	case manifest.EntryCommand:
		if s.URL != "" || s.Builtin != "" {
			return caperr.New(caperr.InvalidInput, "--url goes with --entrypoint http, --builtin with --entrypoint builtin")
		}
	case manifest.EntryHTTP:
		u, err := url.Parse(s.URL)
		if s.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return caperr.New(caperr.InvalidInput, "--entrypoint http needs --url http(s)://HOST/PATH, the endpoint capflow POSTs the inputs to (got %q)", s.URL)
		}
	case manifest.EntryBuiltin:
		if s.Builtin == "" {
			s.Builtin = s.Capability
		}
		if names := builtin.Names(); !slices.Contains(names, s.Builtin) {
			return caperr.New(caperr.InvalidInput, "--entrypoint builtin: capflow has no builtin %q%s; give one with --builtin (capflow builtins: %v)", s.Builtin, suggest.Phrase(s.Builtin, names), names)
		}
		// Its own schemas, to narrow: a wider one fails at run time.
		if own := shippedTool(s.Builtin); own != nil {
			if s.InputSchema == nil {
				s.InputSchema = own.InputSchema
			}
			if s.OutputSchema == nil {
				s.OutputSchema = own.OutputSchema
			}
		}
	default:
		return caperr.New(caperr.InvalidInput, "--entrypoint %q: want command, http or builtin", s.Entrypoint)
	}
	return nil
}

// shippedTool is the shipped kits' tool that runs builtin name (nil when
// none does).
func shippedTool(name string) *manifest.Manifest {
	matches, _ := fs.Glob(kits.Builtin(), "*/*/tool.yaml")
	for _, p := range matches {
		raw, err := fs.ReadFile(kits.Builtin(), p)
		if err != nil {
			continue
		}
		if m, probs := manifest.Parse("builtin:"+p, "", raw); len(probs) == 0 && m.Entrypoint.Type == manifest.EntryBuiltin && m.Entrypoint.Name == name {
			return m
		}
	}
	return nil
}

// unprovided keeps the specs whose capability no tool provides yet, or
// all of them with alongside. A new tool beside a working one could take
// its capability from it for every plan of the project (the first source
// with a candidate wins, the project's tools before its kits by default),
// and a schema_incompatible gap is the step's to fix, not a missing tool:
// a named tool is refused, a gap left to its plan with a warning. A
// sub-plan step's gap (no capability) is always left to its plan.
func (a *App) unprovided(b *envelope.Builder, specs []scaffoldSpec, alongside, fromGaps bool) ([]scaffoldSpec, error) {
	var keep []scaffoldSpec
	for _, s := range specs {
		if s.Capability == "" {
			b.Warn("scaffold", fmt.Sprintf("step %s's gap is left to its plan: %s; fix the step's inputs, what feeds them, or the sub-plan's inputs", s.Step, s.Why))
			continue
		}
		by, err := a.providers(s.Capability, alongside)
		switch {
		case err != nil:
			return nil, err
		case len(by) == 0:
			keep = append(keep, s)
		case !fromGaps:
			return nil, caperr.New(caperr.InvalidInput, "%s is already provided by %s: a new tool for it could take it from them for every plan of the project (capflow tools resolve %s shows the order); pass --alongside to create it anyway", s.Capability, by, s.Capability)
		default:
			b.Warn("scaffold", fmt.Sprintf("step %s's gap is left to its plan: %s; fix the step's inputs or what feeds them, or pass --alongside to give it a tool of its own (which could take %s from %s for every plan of the project)", s.Step, s.Why, s.Capability, by))
		}
	}
	return keep, nil
}

// providers names the tools that provide capability c ("" when none, or
// when alongside says not to look).
func (a *App) providers(c string, alongside bool) (string, error) {
	if alongside {
		return "", nil
	}
	_, reg, err := a.loadRegistry()
	if err != nil {
		return "", err
	}
	var by []string
	for _, m := range reg.Providers(c) {
		by = append(by, m.ID()+" ("+m.Source+")")
	}
	return strings.Join(by, ", "), nil
}

// nextAfterScaffold says what to do with a new tool.
func nextAfterScaffold(s scaffoldSpec) string {
	switch s.Entrypoint {
	case manifest.EntryHTTP:
		return fmt.Sprintf("next: serve %s (the inputs arrive as JSON, the result envelope goes back), then `capflow tools validate` and `capflow tools run NAME --input k=v`", s.URL)
	case manifest.EntryBuiltin:
		return "next: narrow the schemas to what the tool takes, then `capflow tools validate` and `capflow tools run NAME --input k=v`"
	}
	return "next: edit run.sh, then `capflow tools validate` and `capflow tools run NAME --input k=v`"
}
