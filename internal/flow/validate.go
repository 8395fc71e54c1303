package flow

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// WorkflowError is a workflow refused before anything of it was written:
// the field at fault and the nodes it concerns (400).
type WorkflowError struct {
	Field   string
	Message string
	Nodes   []string
	// TooLarge marks a node payload over the limit (413).
	TooLarge bool
}

func (e *WorkflowError) Error() string {
	if len(e.Nodes) == 0 {
		return e.Field + ": " + e.Message
	}
	return fmt.Sprintf("%s: %s (nodes: %s)", e.Field, e.Message, strings.Join(e.Nodes, ", "))
}

// Fault is the refusal: invalid_field naming the field, ErrBadRequest or
// (a node payload over its limit) ErrTooLarge.
func (e *WorkflowError) Fault() *fault.Error {
	kind := triagetype.ErrBadRequest
	if e.TooLarge {
		kind = triagetype.ErrTooLarge
	}
	return &fault.Error{Kind: kind, Code: triagetype.CodeInvalidField, Field: e.Field, Message: e.Error()}
}

// plan is a validated workflow: its nodes in request order, each node's
// parents and children by index, and its roots.
type plan struct {
	nodes    []triagetype.WorkflowNode
	index    map[string]int
	parents  [][]int
	children [][]int
	roots    []int
	depth    int
}

// validate checks a workflow whole: its size, every node's name and task
// fields (as a single submit would), the names its nodes wait for, and
// that the graph is acyclic and at most MaxWorkflowDepth deep. It writes
// nothing and reads nothing.
func validate(r *triagetype.WorkflowRequest, known task.KnownTypes) (*plan, error) {
	n := len(r.Nodes)
	switch {
	case n == 0:
		return nil, &WorkflowError{Field: "nodes", Message: "must hold at least one node"}
	case n > triagetype.MaxWorkflowNodes:
		return nil, &WorkflowError{Field: "nodes", Message: fmt.Sprintf("holds %d nodes; the limit is %d", n, triagetype.MaxWorkflowNodes)}
	}
	if len(r.IdempotencyKey) > task.MaxIdempotencyKey {
		return nil, &WorkflowError{Field: "idempotency_key", Message: fmt.Sprintf("is longer than %d characters", task.MaxIdempotencyKey)}
	}
	if len(r.Name) > triagetype.MaxNodeName {
		return nil, &WorkflowError{Field: "name", Message: fmt.Sprintf("is longer than %d characters", triagetype.MaxNodeName)}
	}
	p := &plan{nodes: r.Nodes, index: make(map[string]int, n), parents: make([][]int, n), children: make([][]int, n)}
	var dups []string
	for i, nd := range r.Nodes {
		field := fmt.Sprintf("nodes[%d].name", i)
		if err := validName(nd.Name); err != nil {
			return nil, &WorkflowError{Field: field, Message: err.Error(), Nodes: []string{nd.Name}}
		}
		if _, dup := p.index[nd.Name]; dup {
			dups = append(dups, nd.Name)
			continue
		}
		p.index[nd.Name] = i
	}
	if len(dups) > 0 {
		return nil, &WorkflowError{Field: "nodes", Message: "node names must be unique", Nodes: dups}
	}
	for i, nd := range r.Nodes {
		prefix := fmt.Sprintf("nodes[%d].", i)
		req := task.Request(nd.SubmitRequest)
		// A node's after names nodes, and its on_parent_failure goes with
		// that after: both are checked below, not as a task's.
		req.After, req.OnParentFailure = nil, ""
		if err := req.Validate(); err != nil {
			var fe *task.FieldError
			if errors.As(err, &fe) {
				return nil, &WorkflowError{Field: prefix + fe.Field, Message: fe.Message, Nodes: []string{nd.Name}, TooLarge: fe.TooLarge}
			}
			return nil, &WorkflowError{Field: prefix, Message: err.Error(), Nodes: []string{nd.Name}}
		}
		if fe := known.Check(nd.Type); fe != nil {
			return nil, &WorkflowError{Field: prefix + fe.Field, Message: fe.Message, Nodes: []string{nd.Name}}
		}
		if _, err := triagetype.ParseParentPolicy(nd.OnParentFailure); err != nil {
			return nil, &WorkflowError{Field: prefix + "on_parent_failure", Message: err.Error(), Nodes: []string{nd.Name}}
		}
		if nd.OnParentFailure != "" && len(nd.After) == 0 {
			return nil, &WorkflowError{Field: prefix + "on_parent_failure", Message: "needs after", Nodes: []string{nd.Name}}
		}
		if len(nd.After) > triagetype.MaxParents {
			return nil, &WorkflowError{Field: prefix + "after", Message: fmt.Sprintf("names %d parents; the limit is %d", len(nd.After), triagetype.MaxParents), Nodes: []string{nd.Name}}
		}
		seen := map[string]bool{}
		for j, a := range nd.After {
			pi, ok := p.index[a]
			switch {
			case !ok:
				return nil, &WorkflowError{Field: fmt.Sprintf("%safter[%d]", prefix, j), Message: fmt.Sprintf("names no node of this workflow: %q", a), Nodes: []string{nd.Name, a}}
			case seen[a]:
				return nil, &WorkflowError{Field: fmt.Sprintf("%safter[%d]", prefix, j), Message: fmt.Sprintf("names %q twice", a), Nodes: []string{nd.Name}}
			case pi == i:
				return nil, &WorkflowError{Field: fmt.Sprintf("%safter[%d]", prefix, j), Message: "a node cannot wait for itself (a cycle)", Nodes: []string{nd.Name}}
			}
			seen[a] = true
			p.parents[i] = append(p.parents[i], pi)
			p.children[pi] = append(p.children[pi], i)
		}
		if len(nd.After) == 0 {
			p.roots = append(p.roots, i)
		}
	}
	if cyc := p.cycle(); cyc != nil {
		return nil, &WorkflowError{Field: "nodes", Message: "the nodes wait for each other in a cycle: " + strings.Join(cyc, " -> "), Nodes: cyc[:len(cyc)-1]}
	}
	depth, path := p.longest()
	if depth > triagetype.MaxWorkflowDepth {
		return nil, &WorkflowError{Field: "nodes", Message: fmt.Sprintf("the longest chain is %d nodes deep; the limit is %d", depth, triagetype.MaxWorkflowDepth), Nodes: path}
	}
	p.depth = depth
	return p, nil
}

// validName checks a node name: 1 to MaxNodeName bytes of printable text
// without '#' or ':'.
func validName(s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return errors.New("is required")
	case len(s) > triagetype.MaxNodeName:
		return fmt.Errorf("is %d bytes; the limit is %d", len(s), triagetype.MaxNodeName)
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f || c == '#' || c == 0xfffd {
			return errors.New("must be printable, without '#'")
		}
	}
	return nil
}

// cycle returns the names along one cycle (its first node repeated at the
// end), or nil when the graph is acyclic. Iterative DFS: a 1,000-node
// chain must not grow the stack.
func (p *plan) cycle() []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(p.nodes))
	from := make([]int, len(p.nodes))
	type frame struct{ node, next int }
	for start := range p.nodes {
		if color[start] != white {
			continue
		}
		stack := []frame{{start, 0}}
		color[start] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(p.children[top.node]) {
				color[top.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			c := p.children[top.node][top.next]
			top.next++
			switch color[c] {
			case white:
				color[c], from[c] = grey, top.node
				stack = append(stack, frame{c, 0})
			case grey: // back edge top.node -> c closes a cycle
				var cyc []string
				for v := top.node; v != c; v = from[v] {
					cyc = append(cyc, p.nodes[v].Name)
				}
				cyc = append(cyc, p.nodes[c].Name)
				slices.Reverse(cyc)
				return append(cyc, p.nodes[c].Name)
			}
		}
	}
	return nil
}

// longest returns the depth of the acyclic graph (nodes on its longest
// chain) and that chain's names.
func (p *plan) longest() (int, []string) {
	n := len(p.nodes)
	indeg := make([]int, n)
	for i := range p.nodes {
		indeg[i] = len(p.parents[i])
	}
	depth := make([]int, n)
	prev := make([]int, n)
	queue := append([]int(nil), p.roots...)
	for _, r := range queue {
		depth[r], prev[r] = 1, -1
	}
	best := -1
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		if best < 0 || depth[v] > depth[best] {
			best = v
		}
		for _, c := range p.children[v] {
			if depth[v]+1 > depth[c] {
				depth[c], prev[c] = depth[v]+1, v
			}
			if indeg[c]--; indeg[c] == 0 {
				queue = append(queue, c)
			}
		}
	}
	if best < 0 {
		return 0, nil
	}
	var path []string
	for v := best; v >= 0; v = prev[v] {
		path = append(path, p.nodes[v].Name)
	}
	slices.Reverse(path)
	return depth[best], path
}
