package registry

import (
	"fmt"
	"slices"
	"strings"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/manifest"
	"github.com/capflow/capflow/internal/suggest"
)

// Candidate is one tool considered for a capability, with why it won or lost.
type Candidate struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Source  string `json:"source"`
	Rank    int    `json:"rank"`
	Chosen  bool   `json:"chosen"`
	Reason  string `json:"reason"`

	Manifest *manifest.Manifest `json:"-"`
	// Excluded is set for candidates a pin rules out.
	Excluded bool `json:"-"`
}

// Resolution is the outcome of resolving one capability.
type Resolution struct {
	Capability string      `json:"capability"`
	Pin        string      `json:"pin,omitempty"`
	Chosen     *Candidate  `json:"chosen"`
	Candidates []Candidate `json:"candidates"`
}

// SplitPin reads a pin or a tool's name: [origin/]name[@version-prefix]
// (origin: a kit's id, or project; see manifest.UID).
func SplitPin(pin string) (origin, name, version string) {
	if o, rest, ok := strings.Cut(pin, "/"); ok {
		origin, pin = o, rest
	}
	name, version, _ = strings.Cut(pin, "@")
	return origin, name, version
}

// Pinned reports whether m is what pin names ("": any tool).
func Pinned(m *manifest.Manifest, pin string) bool {
	if pin == "" {
		return true
	}
	origin, name, ver := SplitPin(pin)
	return m.Name == name && (origin == "" || m.Origin() == origin) && (ver == "" || manifest.MatchesVersionPrefix(m.Version, ver))
}

// ProblemsNote says, where manifests with problems were left out, that
// the tool a name finds nothing for may be one of them ("" when none
// was): a broken tool.yaml is not a missing tool.
func (r *Registry) ProblemsNote() string {
	if len(r.Problems) == 0 {
		return ""
	}
	verb := "keep"
	if len(r.Problems) == 1 {
		verb = "keeps"
	}
	return fmt.Sprintf(" (%s %s some tools out: see capflow tools validate)", caperr.Count(len(r.Problems), "manifest problem"), verb)
}

// firstProblem is the first problem found in file.
func (r *Registry) firstProblem(file string) string {
	for _, p := range r.Problems {
		if p.File == file {
			return p.Error()
		}
	}
	return "(none kept)"
}

// leaveOut records the capabilities a manifest left out declares.
func (r *Registry) leaveOut(file string, data []byte) {
	for _, c := range manifest.Declared(file, data) {
		if r.LeftOut == nil {
			r.LeftOut = map[string][]string{}
		}
		if !slices.Contains(r.LeftOut[c], file) {
			r.LeftOut[c] = append(r.LeftOut[c], file)
		}
	}
}

// Resolve picks the tool for capability c. pin ("name" or
// "name@version-prefix") restricts the candidates. A failure is a
// *caperr.Error with TOOL_NOT_FOUND whose message suggests alternatives.
func (r *Registry) Resolve(c, pin string) (*Resolution, error) {
	res := &Resolution{Capability: c, Pin: pin}
	all := r.byCap[c]
	if files := r.LeftOut[c]; len(all) == 0 && len(files) > 0 {
		// Not a tool to write: one to mend.
		return res, caperr.New(caperr.ToolNotFound, "no tool provides %s: %s declares it but is left out for its problems, first %s (capflow tools validate names them all; fix it, then check again)",
			c, strings.Join(files, ", "), caperr.Headline(r.firstProblem(files[0]), 300))
	}
	if len(all) == 0 {
		// A near spelling first: a typo is likelier than a missing tool.
		near := suggest.Closest(c, r.Capabilities(), 1)
		msg := fmt.Sprintf("no tool provides %s", c)
		if len(near) > 0 {
			msg += fmt.Sprintf(" (did you mean %q?)", near[0])
		}
		if s := slices.DeleteFunc(r.Similar(c), func(k string) bool { return slices.Contains(near, k) }); len(s) > 0 {
			msg += fmt.Sprintf(" (similar: %s)", strings.Join(s, ", "))
		}
		return res, caperr.New(caperr.ToolNotFound, "%s%s", msg, r.ProblemsNote())
	}
	var winner *manifest.Manifest
	for _, m := range all {
		if !Pinned(m, pin) {
			continue
		}
		winner = m
		break
	}
	rank := 0
	var prev *manifest.Manifest
	for _, m := range all {
		rank++
		cand := Candidate{Name: m.Name, Version: m.Version, Source: m.Source, Rank: rank, Manifest: m}
		switch {
		case m == winner:
			cand.Chosen = true
			cand.Reason = r.winReason(m, all, pin)
		case !Pinned(m, pin):
			cand.Reason = fmt.Sprintf("not the pinned tool %s", pin)
			cand.Excluded = true
		case winner != nil && prev != nil:
			cand.Reason = r.loseReason(m, prev)
		}
		if pin == "" || cand.Chosen {
			prev = m
		}
		res.Candidates = append(res.Candidates, cand)
		if cand.Chosen {
			c := cand
			res.Chosen = &c
		}
	}
	if winner == nil {
		var names []string
		for _, m := range all {
			names = append(names, m.ID())
		}
		return res, caperr.New(caperr.ToolNotFound, "pinned tool %s does not provide %s (providers: %s)", pin, c, strings.Join(names, ", "))
	}
	return res, nil
}

func (r *Registry) winReason(m *manifest.Manifest, all []*manifest.Manifest, pin string) string {
	if pin != "" {
		return "pinned by the plan (" + pin + ")"
	}
	if len(all) == 1 {
		return "only provider"
	}
	return fmt.Sprintf("ranked first: from %s, %s, priority %d, version %s", groupName(m), m.Stability, m.Priority, m.Version)
}

func groupName(m *manifest.Manifest) string {
	if m.Source == "project" {
		return ProjectTools
	}
	return ActiveKits
}

func (r *Registry) loseReason(m, w *manifest.Manifest) string {
	switch {
	case r.group(m) != r.group(w):
		return fmt.Sprintf("%s has a candidate and comes first in tool_resolution_order (this one is from %s)", groupName(w), groupName(m))
	case m.Stability != w.Stability:
		return fmt.Sprintf("%s ranks below stable %s", m.Stability, w.ID())
	case m.Priority != w.Priority:
		return fmt.Sprintf("priority %d is lower than %s's %d", m.Priority, w.ID(), w.Priority)
	case manifest.CompareVersions(m.Version, w.Version) != 0:
		return fmt.Sprintf("version %s is older than %s", m.Version, w.ID())
	case m.Name != w.Name:
		return fmt.Sprintf("tie on stability, priority and version; %q sorts after %q", m.Name, w.Name)
	}
	return fmt.Sprintf("same tool in kit %s, which comes after kit %s in active_kits", m.Kit, w.Kit)
}

// Similar lists known capabilities close to c: same domain, same action,
// or a near spelling.
func (r *Registry) Similar(c string) []string {
	dom, act, _ := strings.Cut(c, ".")
	var out []string
	seen := map[string]bool{}
	for _, k := range r.Capabilities() {
		kd, ka, _ := strings.Cut(k, ".")
		if (kd == dom || ka == act) && k != c {
			out = append(out, k)
			seen[k] = true
		}
	}
	for _, k := range suggest.Closest(c, r.Capabilities(), 3) {
		if !seen[k] {
			out = append(out, k)
		}
	}
	if len(out) > 5 {
		out = out[:5]
	}
	return out
}
