package workflows

import (
	"reflect"
	"testing"

	"github.com/capflow/capflow/internal/wfapi"
)

// The way a unit runs, from its facts alone.
func TestChooseWay(t *testing.T) {
	eager := wayFacts{eagerSteps: 3, hostQueue: "capflow@h", taskQueue: "capflow@h", maxAttempts: 3}
	local := wayFacts{runLocal: true, local: true}
	for _, c := range []struct {
		name string
		f    func() wayFacts
		want wayKind
	}{
		{"a plain step", func() wayFacts { return wayFacts{maxAttempts: 3} }, wayRegular},
		{"local", func() wayFacts { return local }, wayLocal},
		{"inline", func() wayFacts { f := local; f.inline = true; return f }, wayInline},
		{"inline, cancelled before it started: local (it ends at once)", func() wayFacts { f := local; f.inline, f.cancelled = true, true; return f }, wayLocal},
		{"local in a run recorded before local activities", func() wayFacts { f := local; f.runLocal = false; return f }, wayRegular},
		{"inline in such a run", func() wayFacts { f := local; f.runLocal, f.inline = false, true; return f }, wayRegular},
		{"eager", func() wayFacts { return eager }, wayEager},
		{"eager asked, one attempt", func() wayFacts { f := eager; f.maxAttempts = 1; return f }, wayRegular},
		{"eager asked, an item", func() wayFacts { f := eager; f.item = true; return f }, wayRegular},
		{"eager asked, the tool's own queue", func() wayFacts { f := eager; f.taskQueue = "gpu"; return f }, wayRegular},
		{"eager asked, no host", func() wayFacts { f := eager; f.hostQueue, f.taskQueue = "", ""; return f }, wayRegular},
		{"eager not asked", func() wayFacts { f := eager; f.eagerSteps = 0; return f }, wayRegular},
		{"local and eager asked: local", func() wayFacts { f := eager; f.runLocal, f.local = true, true; return f }, wayLocal},
	} {
		if got := chooseWay(c.f()); got != c.want {
			t.Errorf("%s: way %d, want %d", c.name, got, c.want)
		}
	}
}

// Every way of ways is a way of its own kind, and each kind has one.
func TestEveryWayRegistered(t *testing.T) {
	var w ways
	seen := map[way]bool{}
	for k := range wayCount {
		x := w.of(k)
		if seen[x] {
			t.Errorf("kind %d shares its way with another", k)
		}
		seen[x] = true
	}
	if n := reflect.TypeFor[ways]().NumField(); n != len(seen) {
		t.Errorf("ways has %d fields, %d reachable by kind: register the new way in of, its kind before wayCount", n, len(seen))
	}
}

// Every setting a run records is in its profile (a new one changes the
// profile, or says in outsideProfile where it is read).
func TestProfileHasEveryRecordedSetting(t *testing.T) {
	zero := newProfile(wfapi.RunSettings{}, false)
	rt := reflect.TypeFor[wfapi.RunSettings]()
	for i := range rt.NumField() {
		f := rt.Field(i)
		if _, ok := outsideProfile[f.Name]; ok {
			continue
		}
		var s wfapi.RunSettings
		v := reflect.ValueOf(&s).Elem().Field(i)
		v.SetInt(987654321) // every setting is a count or a duration
		if newProfile(s, false) == zero {
			t.Errorf("recorded setting %s is not in the profile (versions.go): read it there, or say in outsideProfile where it is read", f.Name)
		}
	}
}

// What a step is decides its driver.
func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		name string
		step wfapi.ResolvedStep
		want stepKind
	}{
		{"a tool", wfapi.ResolvedStep{ID: "a"}, kindTool},
		{"for_each", wfapi.ResolvedStep{ForEach: []any{1}}, kindItems},
		{"for_each of a sub-plan: its items", wfapi.ResolvedStep{ForEach: "${inputs.list}", Plan: "p.yaml"}, kindItems},
		{"a sub-plan", wfapi.ResolvedStep{Plan: "p.yaml"}, kindPlan},
		{"an approval", wfapi.ResolvedStep{Approval: true}, kindApproval},
	} {
		if got := kindOf(c.step); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
