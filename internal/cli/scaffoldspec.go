package cli

import (
	"fmt"
	"io/fs"
	"net/url"
	"slices"
	"strings"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/builtin"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/registry"
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

// unprovided keeps the specs to create. A new tool beside a working one
// serves its capability to every plan of the project wherever it ranks
// first (the first source with a candidate wins, the project's tools
// before its kits by default), and a schema_incompatible gap is the
// step's to fix, not a missing tool: a named tool for a capability some
// tool provides is refused, such a gap left to its plan with a warning,
// unless --alongside. A sub-plan step's gap (no capability) and a pinned
// tool's are the plan's in any case.
func (a *App) unprovided(b *envelope.Builder, specs []scaffoldSpec, f scaffoldFlags, cfg *config.Config) ([]scaffoldSpec, error) {
	var keep []scaffoldSpec
	var reg *registry.Registry
	for _, s := range specs {
		g := s.Gap
		switch {
		case g != nil && s.Capability == "":
			b.Warn("scaffold", fmt.Sprintf("%s is left to its plan: %s; fix the step's inputs, what feeds them, or the sub-plan's inputs", s.where(), g.ReasonMessage))
			continue
		case g != nil && g.Pinned() != "":
			b.Warn("scaffold", fmt.Sprintf("%s is left to its plan: %s; fix or drop its pin (tool: %s), or scaffold a tool of that name", s.where(), g.ReasonMessage, g.Pinned()))
			continue
		case g != nil && len(g.LeftOut()) > 0 && !f.alongside:
			b.Warn("scaffold", fmt.Sprintf("%s is left to its plan: %s declares %s but is left out for its problems; fix it (capflow tools validate names them), or pass --alongside for a second tool", s.where(), strings.Join(g.LeftOut(), ", "), s.Capability))
			continue
		}
		if reg == nil && discovered(s, cfg) {
			var err error
			if _, reg, err = a.loadRegistry(); err != nil {
				return nil, err
			}
		}
		switch by := providers(reg, s, cfg); {
		case by == "":
			keep = append(keep, s)
		case f.alongside:
			keep = append(keep, s)
			b.Warn("scaffold", fmt.Sprintf("%s joins %s as a provider of %s: capflow tools resolve %s shows which one every plan of the project now gets", s.Name, by, s.Capability, s.Capability))
		case g == nil:
			return nil, caperr.New(caperr.InvalidInput, "%s is already provided by %s: a new tool would serve it to every plan of the project wherever it ranks first (capflow tools resolve %s shows the order); fix the plan's step instead, or pass --alongside to create it anyway", s.Capability, by, s.Capability)
		case g.Reason == gap.NoCapabilityMatch:
			b.Warn("scaffold", fmt.Sprintf("%s is left to its plan: %s provides %s now; check the plan again", s.where(), by, s.Capability))
		default:
			b.Warn("scaffold", fmt.Sprintf("%s is left to its plan: %s; fix the step's inputs or what feeds them, or give it a tool of its own (--from-gaps %s --step %s --alongside), which would then serve %s to every plan of the project in place of %s", s.where(), g.ReasonMessage, f.fromGaps, g.StepID, s.Capability, by))
		}
	}
	return keep, nil
}

// where names a gap's step, and where it is written when known.
func (s scaffoldSpec) where() string {
	if at := s.Gap.Where(); at != "" {
		return fmt.Sprintf("step %s (%s)", s.Gap.StepID, at)
	}
	return "step " + s.Gap.StepID
}

// discovered reports whether a tool in s's folder is found: the folder
// lies in a tools_dirs entry.
func discovered(s scaffoldSpec, cfg *config.Config) bool {
	return slices.ContainsFunc(cfg.ToolsDirs, func(d string) bool { _, in := beneath.Rel(cfg.Abs(d), s.Folder); return in })
}

// providers names the tools of reg that provide s's capability ("" for
// none), but the tool s rewrites (--force over its own folder); none when
// no project finds a tool in s's folder.
func providers(reg *registry.Registry, s scaffoldSpec, cfg *config.Config) string {
	if !discovered(s, cfg) {
		return ""
	}
	var by []string
	for _, m := range reg.Providers(s.Capability) {
		if m.Dir != s.Folder {
			by = append(by, m.ID()+" ("+m.Source+")")
		}
	}
	return strings.Join(by, ", ")
}

// nextAfterScaffold says what to do with a new tool; project is the
// --project the command was given ("" none), which the commands it
// suggests need as much.
func nextAfterScaffold(s scaffoldSpec, project string) string {
	flag := ""
	if project != "" {
		flag = " --project " + shellQuote(project)
	}
	then := fmt.Sprintf("then `capflow tools validate%s` and `capflow tools run NAME --input k=v%s`", flag, flag)
	switch s.Entrypoint {
	case manifest.EntryHTTP:
		return fmt.Sprintf("next: serve %s (the inputs arrive as JSON, the result envelope goes back), %s", s.URL, then)
	case manifest.EntryBuiltin:
		return "next: narrow the schemas to what the tool takes, " + then
	}
	return "next: edit run.sh, " + then
}

// shellQuote writes s as one shell word: as it is when it holds only
// characters no shell reads, else single-quoted.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./-+=:@,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
