package builtin

import (
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

// recursive names a template that calls itself, directly or through
// others, in calls (each template's calls; "" when none does). Each call
// nests the Go stack: a template of a few lines recursing under nested
// withs overflowed it, which no recover catches and which kills the
// worker (found attacking issue 57); without recursion, how deep a
// template nests is bounded by its text.
func recursive(calls map[string][]string) string {
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

// walk calls f for n and every node under it.
func walk(n parse.Node, f func(parse.Node)) {
	if n == nil {
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
		walkPipe(t.Pipe, f)
	case *parse.TemplateNode:
		walkPipe(t.Pipe, f)
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
	walkPipe(b.Pipe, f)
	walk(b.List, f)
	if b.ElseList != nil {
		walk(b.ElseList, f)
	}
}

// walkPipe walks p where a node may hold none (a typed nil).
func walkPipe(p *parse.PipeNode, f func(parse.Node)) {
	if p != nil {
		walk(p, f)
	}
}

// maxArgs bounds a function call's arguments: eq compares its first with
// each, and 100,000 comparisons of two 4 MB strings ran on for seconds
// after their step gave up (found attacking issue 57).
const maxArgs = 256

// maxCompared bounds a comparison's values: each may be a 4 MB string
// compared in full, and a comparison is never interrupted.
const maxCompared = 8

// tooManyArgs reports whether c has more than maxArgs arguments, or is a
// comparison of more than maxCompared values.
func tooManyArgs(c *parse.CommandNode) bool {
	limit := maxArgs
	if len(c.Args) > 0 {
		if id, ok := c.Args[0].(*parse.IdentifierNode); ok && strings.Contains(" eq ne lt le gt ge ", " "+id.Ident+" ") {
			limit = maxCompared
		}
	}
	return len(c.Args) > limit+1
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

// checkSize refuses a template's text past maxTemplate: all the worker
// reads of one before its child renders it.
func checkSize(src string) error {
	if len(src) > maxTemplate {
		return caperr.New(caperr.InvalidInput, "template: %s, more than %s", humanBytes(int64(len(src))), humanBytes(maxTemplate))
	}
	return nil
}

// checkSource refuses a template's text past maxTemplate, or whose
// actions nest past maxNesting, before it is parsed (an else if or else
// with nests once more until its block's end).
func checkSource(src string) error {
	if err := checkSize(src); err != nil {
		return err
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
	// A comment opens the action or not at all: looking for one further
	// on, from every action, took a 1 MiB template of "{{/}}" 17 s of the
	// worker's CPU (found attacking issue 57).
	if j := i + len(src[i:]) - len(strings.TrimLeft(src[i:], "- \t\r\n")); strings.HasPrefix(src[j:], "/*") {
		k := strings.Index(src[j:], "*/")
		if k < 0 {
			return len(src) // unclosed: the parser refuses the template
		}
		i = j + k + 2
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
	calls, many := map[string][]string{}, false
	for _, t := range tmpl.Templates() {
		if t.Tree == nil || t.Tree.Root == nil {
			continue
		}
		walk(t.Tree.Root, func(n parse.Node) {
			switch c := n.(type) {
			case *parse.TemplateNode:
				calls[t.Name()] = append(calls[t.Name()], c.Name)
			case *parse.CommandNode:
				many = many || tooManyArgs(c)
			}
		})
	}
	if name := recursive(calls); name != "" {
		return caperr.New(caperr.InvalidInput, "template: %q calls itself, directly or through others: recursion is not supported", name)
	}
	if many {
		return caperr.New(caperr.InvalidInput, "template: a call with too many arguments (at most %d; %d values for a comparison)", maxArgs, maxCompared)
	}
	return nil
}

// maxKeys bounds each map in values: ranging over a map sorts its keys
// first, which nothing interrupts (a million keys took 1.5 s a range).
const maxKeys = 100000

// scanValues refuses values holding a map of more than maxKeys keys, and
// reports whether they hold an integer unrangeable would turn to digits
// (values from JSON hold none: copying them all was seconds and hundreds
// of MB for a large value, before the budget watched), in one walk.
func scanValues(v any) (large bool, err error) {
	switch t := v.(type) {
	case map[string]any:
		if len(t) > maxKeys {
			return false, caperr.New(caperr.InvalidInput, "values: a map of %d keys, more than %d", len(t), maxKeys)
		}
		for _, x := range t {
			l, err := scanValues(x)
			if err != nil {
				return false, err
			}
			large = large || l
		}
	case []any:
		for _, x := range t {
			l, err := scanValues(x)
			if err != nil {
				return false, err
			}
			large = large || l
		}
	case int64:
		return t > maxRangeLiteral, nil
	case int:
		return t > maxRangeLiteral, nil
	case uint64:
		return t > maxRangeLiteral, nil
	}
	return large, nil
}
