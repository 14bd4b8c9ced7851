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
