package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode"

	"github.com/capflow/capflow/internal/wfapi"
)

// An agent answers in the request's language (the design's own examples
// are Russian): the JSON verdict stays one of its three values, the
// headline and the pretty output are translated.
var labels = map[string]map[string]string{
	"en": {
		"task completed": "Task completed", "task not completed": "Task not completed", "dry run: ready to run": "Dry run: ready to run",
		"done": "operations done:", "planned": "operations that would run:", "missing": "operations missing:", "report": "report:", "answer": "answer:",
	},
	"ru": {
		"task completed": "Задача успешно выполнена", "task not completed": "Задача не выполнена", "dry run: ready to run": "Пробный запуск: план готов к выполнению",
		"done": "выполненные операции:", "planned": "операции, которые будут выполнены:", "missing": "недостающие операции:", "report": "отчёт:", "answer": "ответ:",
	},
}

// requestLanguage is "ru" for a request written in Cyrillic, else "en".
func requestLanguage(text string) string {
	for _, r := range text {
		if unicode.Is(unicode.Cyrillic, r) {
			return "ru"
		}
	}
	return "en"
}

func (v verdictData) lang() string {
	if _, ok := labels[v.Lang]; ok {
		return v.Lang
	}
	return "en"
}

func printVerdict(w io.Writer, v verdictData, verdict string, done, planned, missing []Operation) {
	l := labels[v.lang()]
	mark := map[bool]string{true: "✓", false: "✗"}[v.Status == string(wfapi.StatusPassed)]
	if v.DryRun {
		mark = "○"
	}
	fmt.Fprintf(w, "%s %s\n  %s\n", mark, l[verdict], v.Message)
	if len(done) > 0 {
		fmt.Fprintln(w, l["done"])
		for _, d := range done {
			fmt.Fprintf(w, "  ✓ %s  %s\n", d.StepID, d.Capability)
		}
	}
	if len(planned) > 0 {
		fmt.Fprintln(w, l["planned"])
		for _, p := range planned {
			fmt.Fprintf(w, "  → %s  %s → %s\n      %s\n", p.StepID, p.Capability, p.Tool, p.Runs)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintln(w, l["missing"])
		for _, m := range missing {
			fmt.Fprintf(w, "  ✗ %s  %s  (%s)\n", m.StepID, m.Capability, m.Reason)
		}
	}
	if ans := answer(v); ans != "" {
		fmt.Fprintf(w, "%s\n  %s\n", l["answer"], strings.ReplaceAll(ans, "\n", "\n  "))
	}
	if v.Result != nil && v.Result.Report.Markdown != "" {
		fmt.Fprintf(w, "%s %s\n", l["report"], v.Result.Report.Markdown)
	}
}

// answer is what a finished run found, for a person: the plan's outputs,
// else the data of its last step that succeeded (cut to 1,000 bytes).
func answer(v verdictData) string {
	if v.Result == nil {
		return ""
	}
	var x any
	switch {
	case len(v.Result.Outputs) > 0:
		keys := make([]string, 0, len(v.Result.Outputs))
		for k := range v.Result.Outputs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var lines []string
		for _, k := range keys {
			b, _ := json.Marshal(v.Result.Outputs[k])
			lines = append(lines, k+": "+string(b))
		}
		return cut(strings.Join(lines, "\n"))
	default:
		for i := len(v.Result.Steps) - 1; i >= 0; i-- {
			if s := v.Result.Steps[i]; s.Status == wfapi.StepSucceeded && s.Envelope != nil && s.Envelope.Data != nil {
				x = s.Envelope.Data
				break
			}
		}
	}
	if x == nil {
		return ""
	}
	b, _ := json.Marshal(x)
	return cut(string(b))
}

func cut(s string) string {
	if len(s) > 1000 {
		return s[:1000] + "…"
	}
	return s
}
