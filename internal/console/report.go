package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"

	"github.com/capflow/capflow/internal/beneath"
	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/report"
	"github.com/capflow/capflow/internal/runfolder"
	"github.com/capflow/capflow/internal/toolrun"
)

// MaxReport bounds what of a report the console renders: a larger one is
// shown cut there, with a note; past MaxReportRead it is not read at all.
const (
	MaxReport     = 4 << 20
	MaxReportRead = 64 << 20
)

// markdown renders reports: GitHub tables; raw HTML in a report is
// escaped, never passed through (goldmark's default), and an image is
// its text: a report holds what tools and models wrote, and an image
// would fetch its URL when the page opens.
var markdown = goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough),
	goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(imagesAsText{}, 100))))

// imagesAsText renders an image as its alt text and address, as text.
type imagesAsText struct{}

func (imagesAsText) RegisterFuncs(r renderer.NodeRendererFuncRegisterer) {
	r.Register(ast.KindImage, func(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		img := n.(*ast.Image)
		_, _ = w.WriteString("[image: ")
		for c := img.FirstChild(); c != nil; c = c.NextSibling() {
			if t, ok := c.(*ast.Text); ok {
				_, _ = w.Write(util.EscapeHTML(t.Segment.Value(src)))
			}
		}
		_, _ = w.WriteString(" ")
		_, _ = w.Write(util.EscapeHTML(img.Destination))
		_, _ = w.WriteString("]")
		return ast.WalkSkipChildren, nil
	})
}

// getReport renders the run's report.md as HTML, from this project's runs
// folder or the shared store the worker put it in.
func (s *Server) getReport(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	id := r.PathValue("id")
	res, err := s.result(ctx, id)
	if err != nil {
		s.runError(w, id, err, "progress of")
		return
	}
	file := res.Report.Markdown
	src, err := s.o.Project.RunReport(ctx, id, file, MaxReportRead)
	if err != nil {
		writeError(w, http.StatusNotFound, caperr.New(caperr.InvalidInput, "run %s has no report readable here (yet): %v", id, err))
		return
	}
	src = cutReport(src, MaxReport, id)
	var out bytes.Buffer
	if err := markdown.Convert(forConsole(src), &out); err != nil {
		writeError(w, http.StatusInternalServerError, caperr.Wrap(caperr.InternalError, err, "render %s", file))
		return
	}
	writeJSON(w, map[string]string{"file": file, "html": out.String()})
}

// MaxInputs bounds a step's inputs the console shows.
const MaxInputs = 1 << 20

// getInputs answers a step's evaluated inputs as its command tool received
// them (input.json in the step's records, which no tool writes), when the
// run's folder is on this host; builtins record none.
func (s *Server) getInputs(w http.ResponseWriter, r *http.Request) {
	id, step := r.PathValue("id"), r.PathValue("step")
	recDir := runfolder.Records(s.o.Project.RunDir(id), step, -1)
	raw, err := beneath.ReadFile(recDir, toolrun.InputFile, MaxInputs, "inputs")
	if err != nil {
		writeError(w, http.StatusNotFound, caperr.New(caperr.InvalidInput, "no recorded inputs of step %s here (command tools' inputs are recorded in the run's folder, on the worker's host; %v)", step, err))
		return
	}
	if !json.Valid(raw) {
		writeError(w, http.StatusNotFound, caperr.New(caperr.InvalidInput, "the inputs of step %s are unreadable", step))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}

// cutReport keeps a report within max bytes, cut at a line's end, with a
// note saying so and where the whole of it is.
func cutReport(src []byte, max int, id string) []byte {
	if len(src) <= max {
		return src
	}
	head := src[:max]
	if i := bytes.LastIndexByte(head, '\n'); i > 0 {
		head = head[:i+1]
	}
	note := fmt.Sprintf("\n\n---\n\n*The report is %d bytes: the console shows its first %d. `capflow report %s` prints all of it.*\n", len(src), len(head), id)
	return append(append([]byte(nil), head...), note...)
}

// mermaidBlock is report.md's graph, which the page draws itself.
var mermaidBlock = regexp.MustCompile("(?s)\n## Graph\n\n```mermaid\n.*?```\n")

// forConsole is report.md as the page shows it: without its mermaid
// source (the page has the graph) and without emoji, which a machine
// without an emoji font draws as empty boxes (the status is in words).
func forConsole(md []byte) []byte {
	md = mermaidBlock.ReplaceAll(md, []byte("\n"))
	for _, e := range report.StatusMarks() {
		md = bytes.ReplaceAll(md, []byte(e+" "), nil)
	}
	return cutTables(md, MaxTableRows)
}

// MaxTableRows bounds each table of a report the page shows: a run of
// 12,000 steps has a table of 12,000 rows, which held the page for a
// second; the step panel, the timeline and report.md have them all.
const MaxTableRows = 300

// cutTables keeps the first max rows of each markdown table and says how
// many it left out.
func cutTables(md []byte, max int) []byte {
	var out bytes.Buffer
	rows, cut := 0, 0
	for _, line := range bytes.SplitAfter(md, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("|")) {
			if cut > 0 {
				fmt.Fprintf(&out, "\n(%d more rows: the whole report is report.md)\n", cut)
			}
			rows, cut = 0, 0
			out.Write(line)
			continue
		}
		if rows++; rows > max+2 { // its header and separator, then max rows
			cut++
			continue
		}
		out.Write(line)
	}
	if cut > 0 {
		fmt.Fprintf(&out, "\n(%d more rows: the whole report is report.md)\n", cut)
	}
	return out.Bytes()
}
