package builtin

import (
	"text/template"
	"text/template/parse"
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

// tickBodies puts a tick first in each range body under n.
func tickBodies(n parse.Node) {
	switch t := n.(type) {
	case *parse.ListNode:
		if t == nil {
			return
		}
		for _, c := range t.Nodes {
			tickBodies(c)
		}
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
	switch t := n.(type) {
	case *parse.ListNode:
		if t == nil {
			return
		}
		for _, c := range t.Nodes {
			eachCall(c, f)
		}
	case *parse.IfNode:
		eachCall(t.List, f)
		eachCall(t.ElseList, f)
	case *parse.WithNode:
		eachCall(t.List, f)
		eachCall(t.ElseList, f)
	case *parse.RangeNode:
		eachCall(t.List, f)
		eachCall(t.ElseList, f)
	case *parse.TemplateNode:
		f(t.Name)
	}
}
