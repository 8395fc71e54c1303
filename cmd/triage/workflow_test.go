package main

import (
	"testing"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/triagetype"
)

func TestWorkflowTree(t *testing.T) {
	nodes := []triagetype.WorkflowNodeStatus{
		{Name: "A", Status: triage.Completed, Type: "t", TaskID: "1"},
		{Name: "B", After: []string{"A"}, Status: triage.Completed, Type: "t", TaskID: "2"},
		{Name: "C", After: []string{"A"}, Status: triage.Queued, Type: "t", TaskID: "3"},
		{Name: "D", After: []string{"B", "C"}, Status: triage.Waiting, Type: "t", TaskID: "4"},
	}
	want := "A  completed  t  1\n" +
		"├─ B  completed  t  2\n" +
		"│  └─ D  waiting  t  4\n" +
		"└─ C  queued  t  3\n" +
		"   └─ D ↑ (also after C)\n"
	if got := workflowTree(nodes); got != want {
		t.Fatalf("tree:\n%s\nwant:\n%s", got, want)
	}
}

// An abandoned workflow's tree says which nodes were never written; a
// node whose task retention deleted prints as deleted.
func TestWorkflowTreeUnwritten(t *testing.T) {
	nodes := []triagetype.WorkflowNodeStatus{
		{Name: "A", Status: triage.Cancelled, Unwritten: true, Type: "t", TaskID: "1"},
		{Name: "B", After: []string{"A"}, Status: triage.Cancelled, Type: "t", TaskID: "2"},
		{Name: "C", After: []string{"A"}, Type: "t", TaskID: "3"},
	}
	want := "A  cancelled (never written)  t  1\n" +
		"├─ B  cancelled  t  2\n" +
		"└─ C  (deleted)  t  3\n"
	if got := workflowTree(nodes); got != want {
		t.Fatalf("tree:\n%s\nwant:\n%s", got, want)
	}
}
