package registry

import (
	"path/filepath"
	"testing"
	"time"
)

// A Memo answers a load with FreshAfter without looking at the tools'
// files only when its last look began after FreshAfter: a tool edited
// before then is always what Load gives.
func TestMemoFreshAfter(t *testing.T) {
	root := t.TempDir()
	tools := filepath.Join(root, "tools")
	writeTool(t, tools, "one", "1.0.0", "a.b", "")
	o := opts(root)
	o.Memo = &Memo{}
	beforeFirst := time.Now()
	if r, err := Load(o); err != nil || r.Tool("one", "").Version != "1.0.0" {
		t.Fatalf("first load: %v", err)
	}
	time.Sleep(10 * time.Millisecond) // a new modification time
	writeTool(t, tools, "one", "1.1.0", "a.b", "")
	afterEdit := time.Now()
	for _, c := range []struct {
		name       string
		freshAfter time.Time
		want       string
	}{
		{"a run that began before the last look: no new look", beforeFirst, "1.0.0"},
		{"a run that began after the edit: a new look", afterEdit, "1.1.0"},
		{"no time given: a look every time", time.Time{}, "1.1.0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o.FreshAfter = c.freshAfter
			r, err := Load(o)
			if err != nil || r.Tool("one", "").Version != c.want {
				t.Fatalf("got %v %v, want version %s", r.Tool("one", ""), err, c.want)
			}
		})
	}
}
