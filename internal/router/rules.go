package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/schema"
	"github.com/capflow/capflow/internal/yamldoc"
	"github.com/capflow/capflow/schemas"
)

// Intent is one compiled routing rule.
type Intent struct {
	ID          string
	Description string
	Priority    int
	Keywords    []string
	All, Any    []*regexp.Regexp
	None        []*regexp.Regexp
	Require     []string
	Plan        *template.Template
	Order       int
}

// Rules is a compiled router.yaml.
type Rules struct {
	File    string
	Intents []*Intent
}

type rawIntent struct {
	ID          string   `json:"id"`
	Description string   `json:"description"`
	Priority    int      `json:"priority"`
	Keywords    []string `json:"keywords"`
	Match       struct {
		All  []string `json:"all"`
		Any  []string `json:"any"`
		None []string `json:"none"`
	} `json:"match"`
	Require []string `json:"require"`
	Plan    string   `json:"plan"`
}

// LoadRules reads and compiles a rules file; every problem is reported
// with its line (bad regexes and templates included).
func LoadRules(path, display string) (*Rules, error) {
	data, err := yamldoc.ReadFile(path, display)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err // the caller falls back to the shipped rules
	}
	if err != nil {
		return nil, caperr.WithCode(err, caperr.ConfigError)
	}
	return ParseRules(display, data, filepath.Dir(path))
}

// ParseRules compiles rules from bytes.
func ParseRules(display string, data []byte, _ string) (*Rules, error) {
	doc, err := yamldoc.Parse(display, data)
	if err != nil {
		return nil, caperr.WithCode(err, caperr.ConfigError)
	}
	raw := doc.Root.Interface()
	sch := schema.Embedded("router.schema.json", schemas.Must("router.schema.json"))
	var probs caperr.Problems
	at := func(path []string, format string, args ...any) {
		p := doc.Root.PosOf(path)
		probs = append(probs, caperr.New(caperr.ConfigError, format, args...).At(display, p.Line, p.Column, yamldoc.FieldPath(path)))
	}
	for _, v := range sch.Validate(raw) {
		at(v.Path, "%s", v.Message)
	}
	if len(probs) > 0 {
		probs.Sort()
		return nil, probs
	}
	var file struct {
		Intents []rawIntent `json:"intents"`
	}
	b, _ := json.Marshal(raw)
	_ = json.Unmarshal(b, &file)
	rules := &Rules{File: display}
	ids := map[string]bool{}
	for i, ri := range file.Intents {
		base := []string{"intents", fmt.Sprint(i)}
		if ids[ri.ID] {
			at(append(base, "id"), "duplicate intent id %q", ri.ID)
			continue
		}
		ids[ri.ID] = true
		in := &Intent{ID: ri.ID, Description: ri.Description, Priority: ri.Priority, Keywords: ri.Keywords, Require: ri.Require, Order: i}
		compile := func(kind string, pats []string) []*regexp.Regexp {
			var out []*regexp.Regexp
			for j, p := range pats {
				re, err := regexp.Compile(UnicodeBoundaries(p))
				if err != nil {
					at(append(base, "match", kind, fmt.Sprint(j)), "invalid pattern: %v", err)
					continue
				}
				out = append(out, re)
			}
			return out
		}
		in.All, in.Any, in.None = compile("all", ri.Match.All), compile("any", ri.Match.Any), compile("none", ri.Match.None)
		if len(in.All) == 0 && len(in.Any) == 0 {
			at(append(base, "match"), "an intent needs at least one `all` or `any` pattern")
		}
		tpl, err := template.New(ri.ID).Option("missingkey=error").Funcs(funcs(nil)).Parse(ri.Plan)
		if err != nil {
			at(append(base, "plan"), "invalid plan template: %v", err)
			continue
		}
		in.Plan = tpl
		rules.Intents = append(rules.Intents, in)
	}
	if len(probs) > 0 {
		probs.Sort()
		return nil, probs
	}
	return rules, nil
}

// matches reports whether the normalised text satisfies the intent.
func (in *Intent) matches(text string) bool {
	for _, re := range in.All {
		if !re.MatchString(text) {
			return false
		}
	}
	if len(in.Any) > 0 {
		ok := false
		for _, re := range in.Any {
			if re.MatchString(text) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	for _, re := range in.None {
		if re.MatchString(text) {
			return false
		}
	}
	return true
}

// missing lists the entities an intent requires that the request lacks.
func (in *Intent) missing(e Entities) []string {
	var out []string
	for _, r := range in.Require {
		switch {
		case r == "url" && len(e.URLs) == 0, r == "file" && len(e.Files) == 0, r == "folder" && e.Folder == "", r == "dir" && e.Dir == "":
			out = append(out, r)
		}
	}
	return out
}

// Match returns the matching intents, best first: higher priority, then
// file order. Deterministic: no randomness, no network.
func (r *Rules) Match(e Entities) []*Intent {
	var out []*Intent
	for _, in := range r.Intents {
		if in.matches(e.Text) {
			out = append(out, in)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority > out[j].Priority
		}
		return out[i].Order < out[j].Order
	})
	return out
}

// Closest ranks intents by how many of their keywords (and description
// words) the request shares, for "no route" answers.
func (r *Rules) Closest(e Entities, n int) []string {
	type scored struct {
		id    string
		score int
	}
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(e.Text, func(c rune) bool { return !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c > 127) }) {
		words[w] = true
	}
	var all []scored
	for _, in := range r.Intents {
		s := 0
		for _, k := range in.Keywords {
			if words[strings.ToLower(k)] {
				s += 2
			}
		}
		for _, w := range strings.Fields(strings.ToLower(in.Description)) {
			if len(w) > 3 && words[w] {
				s++
			}
		}
		if s > 0 {
			all = append(all, scored{in.ID, s})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].score > all[j].score })
	var out []string
	for i := 0; i < len(all) && i < n; i++ {
		out = append(out, all[i].id)
	}
	return out
}

// render executes an intent's plan template.
func (in *Intent) render(e Entities, root string) (string, error) {
	data := map[string]any{
		"Text": e.Text, "URLs": e.URLs, "URL": e.URL(), "Files": e.Files, "File": e.File(),
		"Folder": e.Folder, "Dir": e.Dir, "Mode": e.Mode,
	}
	var buf bytes.Buffer
	if err := in.Plan.Funcs(funcs(&root)).Execute(&buf, data); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// funcs are the template helpers; json quotes any value safely for YAML.
func funcs(root *string) template.FuncMap {
	return template.FuncMap{
		"json": func(v any) (string, error) { b, err := json.Marshal(v); return string(b), err },
		"default": func(def string, v string) string {
			if v == "" {
				return def
			}
			return v
		},
		"stepid": func(prefix string, i int) string { return fmt.Sprintf("%s_%d", prefix, i+1) },
		// glob lists files under the project (bounded), sorted, relative.
		"glob": func(dir, pattern string) ([]string, error) {
			base, rel, err := inProject(root, dir)
			if err != nil {
				return nil, err
			}
			matches, err := filepath.Glob(filepath.Join(base, rel, pattern))
			if err != nil {
				return nil, err
			}
			sort.Strings(matches)
			if len(matches) > 1000 {
				matches = matches[:1000]
			}
			for i, m := range matches {
				matches[i], _ = filepath.Rel(base, m)
			}
			return matches, nil
		},
		// indir returns dir, relative to the project, or refuses a folder
		// outside it (the request is at fault).
		"indir": func(dir string) (string, error) {
			_, rel, err := inProject(root, dir)
			return rel, err
		},
		"suffix": func(s, old, new string) string { return strings.TrimSuffix(s, old) + new },
		// fail ends rendering: the intent matched but cannot build a plan
		// from this request (e.g. no files to convert).
		"fail": func(msg string) (string, error) { return "", NoPlan(msg) },
		"filter": func(suffix string, xs []string) []string {
			var out []string
			for _, x := range xs {
				if strings.HasSuffix(strings.ToLower(x), suffix) {
					out = append(out, x)
				}
			}
			return out
		},
	}
}

// inProject resolves a folder a request names against the project root:
// the absolute root and the folder relative to it, or BadRequest when the
// folder is outside the project.
func inProject(root *string, dir string) (string, string, error) {
	base := "."
	if root != nil && *root != "" {
		base = *root
	}
	base, _ = filepath.Abs(base)
	full := filepath.Clean(filepath.Join(base, dir))
	if full != base && !strings.HasPrefix(full, base+string(filepath.Separator)) {
		return "", "", BadRequest(fmt.Sprintf("the folder %s is outside the project", dir))
	}
	rel, _ := filepath.Rel(base, full)
	return base, rel, nil
}

// NoPlan is a rule's refusal to plan this request (not a broken rule).
type NoPlan string

func (n NoPlan) Error() string { return string(n) }

// BadRequest is a request a rule cannot honour because of what it asks
// (a folder outside the project): the request is at fault, not the rule.
type BadRequest string

func (b BadRequest) Error() string { return string(b) }
