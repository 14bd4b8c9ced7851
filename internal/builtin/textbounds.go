package builtin

import (
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/capflow/capflow/internal/caperr"
)

// tickFunc is the function ticks calls: it fails once the template's
// budget has ended.
const tickFunc = "capflowTick"

// ticks has every loop body and every template of tmpl call tickFunc
// first. A template cannot be interrupted: the buffer stops one that
// writes past its budget, but nested ranges that write nothing ran on
// after their step had given up (hours of a core for a few lines of a
// plan), and so did templates calling themselves. With ticks they stop
// at their next iteration or call.
func ticks(tmpl *template.Template) {
	for _, t := range tmpl.Templates() {
		if t.Tree == nil || t.Tree.Root == nil {
			continue
		}
		root := t.Tree.Root
		tickBodies(root)
		root.Nodes = append([]parse.Node{tickAction(root.Pos)}, root.Nodes...)
	}
}

// tickBodies puts a tick first in each range body under n, and before
// each action and template call.
func tickBodies(n parse.Node) {
	switch t := n.(type) {
	case *parse.ListNode:
		if t == nil {
			return
		}
		// A tick before each action and call too: one action's work (eq
		// over long strings) is the most that runs on past the budget.
		nodes := make([]parse.Node, 0, 2*len(t.Nodes))
		for _, c := range t.Nodes {
			tickBodies(c)
			switch c.(type) {
			case *parse.ActionNode, *parse.TemplateNode:
				nodes = append(nodes, tickAction(c.Position()))
			}
			nodes = append(nodes, c)
		}
		t.Nodes = nodes
	case *parse.IfNode:
		tickBodies(t.List)
		tickBodies(t.ElseList)
	case *parse.WithNode:
		tickBodies(t.List)
		tickBodies(t.ElseList)
	case *parse.RangeNode:
		tickBodies(t.List)
		tickBodies(t.ElseList)
		if t.List != nil {
			t.List.Nodes = append([]parse.Node{tickAction(t.Pos)}, t.List.Nodes...)
		}
	}
}

// tickAction is {{capflowTick}}, which prints nothing.
func tickAction(pos parse.Pos) *parse.ActionNode {
	cmd := &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos, Args: []parse.Node{parse.NewIdentifier(tickFunc).SetPos(pos)}}
	return &parse.ActionNode{NodeType: parse.NodeAction, Pos: pos, Pipe: &parse.PipeNode{NodeType: parse.NodePipe, Pos: pos, Cmds: []*parse.CommandNode{cmd}}}
}

// recursive names a template of tmpl that calls itself, directly or
// through others ("" when none does). Each call nests the Go stack: a
// template of a few lines recursing under nested withs overflowed it,
// which no recover catches and which kills the worker (found attacking
// issue 57); without recursion, how deep a template nests is bounded by
// its text.
func recursive(tmpl *template.Template) string {
	calls := map[string][]string{}
	for _, t := range tmpl.Templates() {
		if t.Tree != nil {
			eachCall(t.Tree.Root, func(name string) { calls[t.Name()] = append(calls[t.Name()], name) })
		}
	}
	state := map[string]int{} // 1: on the path, 2: done
	var visit func(string) string
	visit = func(name string) string {
		switch state[name] {
		case 1:
			return name
		case 2:
			return ""
		}
		state[name] = 1
		for _, c := range calls[name] {
			if r := visit(c); r != "" {
				return r
			}
		}
		state[name] = 2
		return ""
	}
	for name := range calls {
		if r := visit(name); r != "" {
			return r
		}
	}
	return ""
}

// eachCall calls f with the name of each template n calls.
func eachCall(n parse.Node, f func(string)) {
	walk(n, func(n parse.Node) {
		if t, ok := n.(*parse.TemplateNode); ok {
			f(t.Name)
		}
	})
}

// walk calls f for n and every node under it.
func walk(n parse.Node, f func(parse.Node)) {
	if n == nil || reflect.ValueOf(n).IsNil() {
		return
	}
	f(n)
	switch t := n.(type) {
	case *parse.ListNode:
		for _, c := range t.Nodes {
			walk(c, f)
		}
	case *parse.IfNode:
		walkBranch(&t.BranchNode, f)
	case *parse.WithNode:
		walkBranch(&t.BranchNode, f)
	case *parse.RangeNode:
		walkBranch(&t.BranchNode, f)
	case *parse.ActionNode:
		walk(t.Pipe, f)
	case *parse.TemplateNode:
		walk(t.Pipe, f)
	case *parse.PipeNode:
		for _, c := range t.Cmds {
			walk(c, f)
		}
	case *parse.CommandNode:
		for _, a := range t.Args {
			walk(a, f)
		}
	case *parse.ChainNode:
		walk(t.Node, f)
	}
}

func walkBranch(b *parse.BranchNode, f func(parse.Node)) {
	walk(b.Pipe, f)
	walk(b.List, f)
	walk(b.ElseList, f)
}

// maxArgs bounds a function call's arguments: eq compares its first with
// each, and 100,000 comparisons of two 4 MB strings ran on for seconds
// after their step gave up (found attacking issue 57).
const maxArgs = 256

// maxCompared bounds a comparison's values: each may be a 4 MB string
// compared in full, and a comparison is never interrupted.
const maxCompared = 8

// manyArgs reports a call in tmpl with more than maxArgs arguments, or a
// comparison of more than maxCompared values.
func manyArgs(tmpl *template.Template) bool {
	many := false
	for _, t := range tmpl.Templates() {
		if t.Tree != nil {
			walk(t.Tree.Root, func(n parse.Node) {
				c, ok := n.(*parse.CommandNode)
				if !ok || len(c.Args) == 0 {
					return
				}
				limit := maxArgs
				if id, ok := c.Args[0].(*parse.IdentifierNode); ok && strings.Contains(" eq ne lt le gt ge ", " "+id.Ident+" ") {
					limit = maxCompared
				}
				many = many || len(c.Args) > limit+1
			})
		}
	}
	return many
}

const (
	// maxTemplate bounds a template's text: parsing takes about 60 bytes
	// of heap a byte, before its budget watches.
	maxTemplate = 1 << 20
	// maxNesting bounds how deep actions nest: the parser and the
	// executor recurse for each level, about 1 KB of stack each, and a
	// stack overflow kills the process (a 4 MB template of {{if.}} did;
	// found attacking issue 57).
	maxNesting = 1000
)

// checkSource refuses a template's text past maxTemplate, or whose
// actions nest past maxNesting, before it is parsed (an else if or else
// with nests once more until its block's end).
func checkSource(src string) error {
	if len(src) > maxTemplate {
		return caperr.New(caperr.InvalidInput, "template: %s, more than %s", humanBytes(int64(len(src))), humanBytes(maxTemplate))
	}
	var open []int // per open block, the levels its end closes
	depth := 0
	for i := strings.Index(src, "{{"); i >= 0; i = next(src, actionEnd(src, i+2)) {
		word, rest := actionWord(src[i+2:])
		switch {
		case word == "if" || word == "with" || word == "range" || word == "block" || word == "define":
			open = append(open, 1)
			depth++
		case word == "else" && len(open) > 0 && (strings.HasPrefix(rest, "if") || strings.HasPrefix(rest, "with")):
			open[len(open)-1]++
			depth++
		case word == "end" && len(open) > 0:
			depth -= open[len(open)-1]
			open = open[:len(open)-1]
		}
		if depth > maxNesting {
			return caperr.New(caperr.InvalidInput, "template: actions nest more than %d deep", maxNesting)
		}
	}
	return nil
}

// actionEnd is where the action from src[i:] (past its "{{") ends: past
// its "}}", skipping its comment and quoted text, where a "{{end" or a
// "}}" is no action's.
func actionEnd(src string, i int) int {
	if j := strings.Index(src[i:], "/*"); j >= 0 && strings.TrimLeft(src[i:i+j], "- \t\r\n") == "" {
		if k := strings.Index(src[i+j:], "*/"); k >= 0 {
			i += j + k + 2
		}
	}
	for i < len(src) {
		switch c := src[i]; c {
		case '"', '\'', '`':
			for i++; i < len(src) && src[i] != c; i++ {
				if src[i] == '\\' && c != '`' {
					i++
				}
			}
		case '}':
			if strings.HasPrefix(src[i:], "}}") {
				return i + 2
			}
		}
		i++
	}
	return len(src)
}

// next is the index of the next "{{" at or after i (-1: none).
func next(src string, i int) int {
	if i >= len(src) {
		return -1
	}
	k := strings.Index(src[i:], "{{")
	if k < 0 {
		return -1
	}
	return i + k
}

// actionWord is an action's first word and what follows it.
func actionWord(s string) (string, string) {
	s = strings.TrimLeft(strings.TrimPrefix(s, "-"), " \t\r\n")
	w := 0
	for w < len(s) && s[w] >= 'a' && s[w] <= 'z' {
		w++
	}
	return s[:w], strings.TrimLeft(s[w:], " \t\r\n")
}

// checkTemplate refuses what a parsed template may not ask before it
// runs: ranges past their bounds, recursion, a call of too many arguments.
func checkTemplate(tmpl *template.Template) error {
	if err := checkRanges(tmpl.Tree.Root, 1); err != nil {
		return err
	}
	if name := recursive(tmpl); name != "" {
		return caperr.New(caperr.InvalidInput, "template: %q calls itself, directly or through others: recursion is not supported", name)
	}
	if manyArgs(tmpl) {
		return caperr.New(caperr.InvalidInput, "template: a call with too many arguments (at most %d; %d values for a comparison)", maxArgs, maxCompared)
	}
	return nil
}

// maxKeys bounds each map in values: ranging over a map sorts its keys
// first, which nothing interrupts (a million keys took 1.5 s a range).
const maxKeys = 100000

// fewKeys refuses values holding a map of more than maxKeys keys.
func fewKeys(v any) error {
	switch t := v.(type) {
	case map[string]any:
		if len(t) > maxKeys {
			return caperr.New(caperr.InvalidInput, "values: a map of %d keys, more than %d", len(t), maxKeys)
		}
		for _, x := range t {
			if err := fewKeys(x); err != nil {
				return err
			}
		}
	case []any:
		for _, x := range t {
			if err := fewKeys(x); err != nil {
				return err
			}
		}
	}
	return nil
}

// hasLargeInts reports whether v holds an integer unrangeable would turn
// to digits (values from JSON hold none: copying them all was seconds and
// hundreds of MB for a large value, before the budget watched).
func hasLargeInts(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for _, x := range t {
			if hasLargeInts(x) {
				return true
			}
		}
	case []any:
		for _, x := range t {
			if hasLargeInts(x) {
				return true
			}
		}
	case int64, int, uint64:
		return unrangeable(v) != v
	}
	return false
}
