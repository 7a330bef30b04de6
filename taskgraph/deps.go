package taskgraph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// MaxDependencyResultBytes bounds the results carried by one answer's
// Dependencies (a claim, Store.Dependencies): at most this many bytes of
// results in total. A dependency whose result does not fit in what is left
// is returned with ResultOmitted set and no Result; Task on its TaskID
// returns the result whole.
const MaxDependencyResultBytes = limits.MaxDependencyResultBytes

// dependencies returns the direct dependencies of task seq in creation order
// with their results, within MaxDependencyResultBytes: results are taken in
// order while they fit in what is left of the bound; one that does not fit is
// omitted (ResultOmitted) and later, smaller ones may still be carried.
func dependencies(ctx context.Context, rd tgdriver.Reads, seq int64) ([]Dependency, error) {
	deps, err := rd.Dependencies(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("read dependencies: %w", err)
	}
	out := make([]Dependency, 0, len(deps))
	left := MaxDependencyResultBytes
	for _, d := range deps {
		dep := Dependency{NodeID: d.NodeID, TaskID: d.TaskID, State: State(d.State)}
		if dep.State == StateCompleted {
			tr, err := rd.TaskBySeq(ctx, d.Seq)
			if err != nil {
				return nil, fmt.Errorf("read dependency %s: %w", d.TaskID, err)
			}
			if tr.HasResult {
				if len(tr.Result) <= left {
					dep.Result = json.RawMessage(tr.Result)
					left -= len(tr.Result)
				} else {
					dep.ResultOmitted = true
				}
			}
		}
		out = append(out, dep)
	}
	return out, nil
}

// Dependencies returns the direct dependencies of task taskID, in creation
// order, with their states and results (within MaxDependencyResultBytes in
// total, see Dependency), read from one snapshot.
func (s *Store) Dependencies(ctx context.Context, taskID string) ([]Dependency, error) {
	if err := checkTaskID(taskID); err != nil {
		return nil, err
	}
	var out []Dependency
	err := s.drv.Snapshot(ctx, func(rd tgdriver.Reads) error {
		tr, err := rd.TaskByID(ctx, taskID)
		if errors.Is(err, tgdriver.ErrNoRows) {
			return &NotFoundError{What: "task", ID: taskID}
		}
		if err != nil {
			return err
		}
		out, err = dependencies(ctx, rd, tr.Seq)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("read dependencies of %s: %w", taskID, err)
	}
	return out, nil
}

// TaskByNode returns node nodeID of workflow workflowID, as Task does (a
// lapsed lease is processed first).
func (s *Store) TaskByNode(ctx context.Context, workflowID, nodeID string) (Task, error) {
	if err := checkIdentifier("workflow_id", workflowID); err != nil {
		return Task{}, err
	}
	if err := checkIdentifier("node_id", nodeID); err != nil {
		return Task{}, err
	}
	tr, err := s.drv.Reads().TaskByNode(ctx, workflowID, nodeID)
	if errors.Is(err, tgdriver.ErrNoRows) {
		return Task{}, &NodeNotFoundError{WorkflowID: workflowID, NodeID: nodeID}
	}
	if err != nil {
		return Task{}, fmt.Errorf("read node %s of workflow %s: %w", nodeID, workflowID, err)
	}
	return s.Task(ctx, tr.TaskID)
}
