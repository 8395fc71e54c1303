package gohandlers

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/triagehq/triage/internal/handler"
)

// holder embeds a Link, as worker.Worker does.
type holder struct {
	Link
}

func TestSetAndOf(t *testing.T) {
	s := &Set{}
	ok := handler.Func(func(context.Context, handler.Request) (json.RawMessage, error) { return json.RawMessage(`1`), nil })
	if err := s.Add("a", ok); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("a", ok); !errors.Is(err, handler.ErrDuplicate) {
		t.Fatalf("a second handler for a: %v, want ErrDuplicate", err)
	}
	s.Use(func(ctx context.Context, r handler.Request, next handler.Func) (json.RawMessage, error) {
		return json.RawMessage(`2`), nil
	})
	// Each registry is fresh and carries the middleware.
	r1, r2 := s.Registry(), s.Registry()
	if r1 == r2 || !r1.Has("a") {
		t.Fatal("Registry is not a fresh registry with the set's handlers")
	}
	h, err := r1.Lookup("a")
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := h.Handle(context.Background(), handler.Request{}); string(out) != "2" {
		t.Fatalf("middleware did not wrap the handler: %s", out)
	}

	for _, tt := range []struct {
		name string
		v    any
		want *Set
	}{
		{"a holder", &holder{Link: NewLink(s)}, s},
		{"a holder by value", holder{Link: NewLink(s)}, s},
		{"an empty link", &holder{}, nil},
		{"anything else", "x", nil},
		{"nil", nil, nil},
	} {
		got, ok := Of(tt.v)
		if got != tt.want || ok != (tt.want != nil) {
			t.Errorf("%s: Of = %p, %v; want %p", tt.name, got, ok, tt.want)
		}
	}
}
