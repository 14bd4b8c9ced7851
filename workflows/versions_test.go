package workflows

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/capflow/capflow/workflows/limit"
)

// The workflow code asks for changes only through versionOf, each by a
// constant declared in versions.go; GetVersion itself is called only
// there.
func TestGetVersionUsesDeclaredChanges(t *testing.T) {
	declared := map[string]bool{}
	for _, c := range Changes {
		declared[c.ID] = true
	}
	asked := map[string]bool{changeBaseline: true} // versionOf asks it
	for _, dir := range []string{".", "limit"} {
		consts := declaredConstants(t, filepath.Join(dir, "versions.go"))
		eachSourceFile(t, dir, func(fset *token.FileSet, file *ast.File) {
			ast.Inspect(file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				pos := fset.Position(call.Pos())
				if sel, isSel := callee(call); isSel && sel == "GetVersion" && filepath.Base(pos.Filename) != "versions.go" {
					t.Errorf("%s: GetVersion outside versions.go (ask versionOf)", pos)
				}
				if fn, isIdent := call.Fun.(*ast.Ident); !isIdent || fn.Name != "versionOf" || filepath.Base(pos.Filename) == "versions.go" {
					return true
				}
				id, ok := call.Args[1].(*ast.Ident)
				if c := consts[identName(id, ok)]; !ok || !declared[c] {
					t.Errorf("%s: versionOf's change is not a constant of versions.go's Changes", pos)
				} else {
					asked[c] = true
				}
				return true
			})
		})
	}
	for _, c := range Changes {
		if !asked[c.ID] {
			t.Errorf("change %s: no code asks for it", c.ID)
		}
	}
}

// The limit workflow's changes (its own package) are in the one list, at
// the latest version its code knows.
func TestLimitChangesDeclared(t *testing.T) {
	for id, v := range limit.Latest {
		i := slices.IndexFunc(Changes, func(c Change) bool { return c.ID == id })
		if i < 0 || Changes[i].Max != v {
			t.Errorf("limit change %s (latest %d) is not in Changes at that version", id, v)
		}
	}
}

// Each baseline holds every change of this workflow declared before it,
// at a version the change has; baselines 2 and 3 at its latest. Baseline
// 1 changed nothing of its own: no later baseline holds it.
func TestBaselinesCoverEveryEarlierChange(t *testing.T) {
	for _, b := range []struct {
		id     string
		m      map[string]workflow.Version
		latest bool
	}{{changeBaseline, baseline1, false}, {changeBaseline2, baseline2, true}, {changeBaseline3, baseline3, true}} {
		want := 0
		for _, c := range Changes {
			if c.ID == b.id {
				break
			}
			if c.ID == changeBaseline || limit.Latest[c.ID] != 0 {
				continue
			}
			want++
			if v, ok := b.m[c.ID]; !ok || v < 1 || v > c.Max || (b.latest && v != c.Max) {
				t.Errorf("%s: change %s at %d (%v), its versions are 1..%d", b.id, c.ID, v, ok, c.Max)
			}
		}
		if len(b.m) != want {
			t.Errorf("%s names %d changes, %d are declared before it", b.id, len(b.m), want)
		}
	}
}

// Every change has a recorded history, of its latest version unless it
// says why no recorded run can show that version (Uncovered); each such
// history fails replay altered to say the run took a version the code
// does not know (it reaches the change's GetVersion), and altered to say
// it took the version before (it shows the change's difference; an
// uncovered change only logs it).
func TestEveryChangeHasARecordedHistory(t *testing.T) {
	for _, c := range Changes {
		latest := slices.ContainsFunc(c.Histories, func(h History) bool { return h.Version == c.Max })
		if len(c.Histories) == 0 || len(c.Versions) != int(c.Max) || (!latest && c.Uncovered == "") {
			t.Errorf("change %s: %d histories (of version %d: %v), %d versions described (want %d)", c.ID, len(c.Histories), c.Max, latest, len(c.Versions), c.Max)
			continue
		}
		if c.Uncovered != "" {
			t.Logf("change %s version %d has no covering history: %s", c.ID, c.Max, c.Uncovered)
		}
		for _, hist := range c.Histories {
			t.Run(c.ID+"/"+hist.File, func(t *testing.T) {
				brokenReplayFails(t, c.ID, hist, int(hist.Version)-1, c.Uncovered != "")
				// Whatever else it shows, the run reached the change's
				// GetVersion: a version the code does not know fails it.
				brokenReplayFails(t, c.ID, hist, int(c.Max)+1, false)
			})
		}
	}
}

// brokenReplayFails replays hist altered to say it took version to of
// change (0: the default), and fails unless the replay fails (or,
// uncovered, only logs it).
func brokenReplayFails(t *testing.T, change string, hist History, to int, uncovered bool) {
	raw := readHistory(t, filepath.Join("testdata/histories", hist.File))
	if to == 0 {
		to = int(workflow.DefaultVersion)
	}
	broken, found := withVersion(t, raw, change, int(hist.Version), to)
	if !found {
		t.Fatalf("%s records no version %d of %s", hist.File, hist.Version, change)
	}
	f := filepath.Join(t.TempDir(), "broken-"+strings.TrimSuffix(hist.File, ".gz"))
	if err := os.WriteFile(f, broken, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DisableDeadlockDetection: true})
	if err != nil {
		t.Fatal(err)
	}
	registerWorkflows(r)
	if replay(r, f, true) == nil {
		if uncovered {
			t.Logf("%s replays as if it took %s version %d (uncovered)", hist.File, change, to)
			return
		}
		t.Fatalf("%s replayed as if it took %s version %d: it does not cover the change", hist.File, change, to)
	}
}

// declaredConstants maps a versions.go's constant names to their values.
func declaredConstants(t *testing.T, path string) map[string]string {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range file.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			for i, n := range v.Names {
				if lit, ok := v.Values[i].(*ast.BasicLit); ok {
					out[n.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
	}
	return out
}

func callee(call *ast.CallExpr) (string, bool) {
	if call == nil {
		return "", false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	return sel.Sel.Name, true
}

func identName(id *ast.Ident, ok bool) string {
	if !ok {
		return ""
	}
	return id.Name
}

// readHistory reads a recorded history, gunzipped.
func readHistory(t *testing.T, f string) []byte {
	raw, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(f, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := b.ReadFrom(zr); err != nil {
			t.Fatal(err)
		}
		raw = b.Bytes()
	}
	return raw
}

// withVersion rewrites the history's Version marker of change from
// version from to version to.
func withVersion(t *testing.T, raw []byte, change string, from, to int) ([]byte, bool) {
	var h map[string]any
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	found := false
	events, _ := h["events"].([]any)
	for _, e := range events {
		m, _ := e.(map[string]any)["markerRecordedEventAttributes"].(map[string]any)
		if m == nil || m["markerName"] != "Version" {
			continue
		}
		details := m["details"].(map[string]any)
		if payloadValue(details["change-id"]) != strconv.Quote(change) || payloadValue(details["version"]) != strconv.Itoa(from) {
			continue
		}
		found = true
		p := details["version"].(map[string]any)["payloads"].([]any)[0].(map[string]any)
		p["data"] = base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(to)))
	}
	out, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	return out, found
}

// payloadValue is a marker detail's first payload, as JSON text.
func payloadValue(d any) string {
	ps, _ := d.(map[string]any)["payloads"].([]any)
	if len(ps) == 0 {
		return ""
	}
	data, _ := ps[0].(map[string]any)["data"].(string)
	b, _ := base64.StdEncoding.DecodeString(data)
	return string(b)
}
