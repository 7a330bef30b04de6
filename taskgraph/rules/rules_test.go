package rules

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestRules(t *testing.T) {
	t.Parallel()
	if err := CheckIdentifier("node_id", "a.b:c-1"); err != nil {
		t.Fatalf("a valid identifier was refused: %v", err)
	}
	var ve *ValidationError
	if err := CheckIdentifier("node_id", "-x"); !errors.Is(err, ErrInvalid) || !errors.As(err, &ve) || ve.Field != "node_id" {
		t.Fatalf("CheckIdentifier(-x) = %v, want a *ValidationError on node_id", err)
	}
	if err := CheckIdentifier("owner", strings.Repeat("a", 200)); err == nil || !strings.Contains(err.Error(), "at most 128") {
		t.Fatalf("a long identifier: %v, want its length named", err)
	}
	if !TaskIDForm("01ARZ3NDEKTSV4RRFFQ69G5FAV") || TaskIDForm("01arz3ndektsv4rrffq69g5fav") || TaskIDForm("01ARZ") {
		t.Fatal("TaskIDForm misjudges a task id's form")
	}
	tags, err := CanonicalTags("requires", []string{"gpu", "cpu", "gpu"}, 4)
	if err != nil || !slices.Equal(tags, []string{"cpu", "gpu"}) {
		t.Fatalf("CanonicalTags = %v, %v; want [cpu gpu]", tags, err)
	}
	if _, err := CanonicalTags("requires", []string{"GPU"}, 4); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an upper-case tag: %v, want ErrInvalid", err)
	}
	if !SubsetOf("", nil) || !SubsetOf("cpu gpu", []string{"cpu", "gpu", "x"}) || SubsetOf("cpu gpu", []string{"cpu"}) {
		t.Fatal("SubsetOf misjudges requires against capabilities")
	}
	if m := MissingTags([]string{"a", "b", "c"}, []string{"b"}); !slices.Equal(m, []string{"a", "c"}) {
		t.Fatalf("MissingTags = %v, want [a c]", m)
	}
	if CheckErrorText("") == nil || CheckErrorText("\xff") == nil || CheckErrorText("boom") != nil {
		t.Fatal("CheckErrorText misjudges an error text")
	}
	if CheckOperator("alice", "") == nil || CheckOperator("", "why") == nil || CheckOperator("alice", "why") != nil {
		t.Fatal("CheckOperator misjudges an operator")
	}
}
