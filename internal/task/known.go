package task

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// KnownTypes is the set of task types a deployment runs (TRIAGE_TYPES).
// A submit of another type is refused, naming the field, rather than
// accepted and dead-lettered later for want of a handler. The zero value
// (no types) accepts every type.
type KnownTypes struct {
	types map[string]bool
}

// NewKnownTypes returns the set of types; none means any type.
func NewKnownTypes(types []string) KnownTypes {
	if len(types) == 0 {
		return KnownTypes{}
	}
	k := KnownTypes{types: map[string]bool{}}
	for _, t := range types {
		k.types[t] = true
	}
	return k
}

// Check returns a *FieldError naming "type" when typ is not in the set.
func (k KnownTypes) Check(typ string) *FieldError {
	if k.types == nil || k.types[typ] {
		return nil
	}
	names := slices.Sorted(maps.Keys(k.types))
	return &FieldError{Field: "type", Message: fmt.Sprintf("unknown task type %q: this deployment runs %s (TRIAGE_TYPES)", Shorten(typ, 64), strings.Join(names, ", "))}
}

// Shorten cuts s to n bytes for an error message that quotes input,
// marking the cut with "…" and replacing invalid UTF-8 with "?".
func Shorten(s string, n int) string {
	if len(s) <= n {
		return strings.ToValidUTF8(s, "?")
	}
	return strings.ToValidUTF8(s[:n], "?") + "…"
}
