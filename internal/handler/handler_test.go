package handler

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRegisterRefusesDuplicates(t *testing.T) {
	r := NewRegistry()
	h := Func(func(context.Context, Request) (json.RawMessage, error) { return nil, nil })
	if err := r.Register("a", h); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("a", h); !errors.Is(err, ErrDuplicate) || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("second Register = %v, want ErrDuplicate naming the type", err)
	}
	r.Replace("a", h) // the deliberate override
	if !r.Has("a") || r.Has("b") {
		t.Fatal("Has")
	}
	if _, err := r.Lookup("b"); !errors.Is(err, ErrNoHandler) {
		t.Fatalf("Lookup of an unknown type = %v", err)
	}
}

// Middleware runs in the order it was added, outermost first, around
// every handler, and can change the outcome.
func TestMiddlewareOrder(t *testing.T) {
	var trail []string
	mw := func(name string) Middleware {
		return func(ctx context.Context, r Request, next Func) (json.RawMessage, error) {
			trail = append(trail, name+">")
			out, err := next(ctx, r)
			trail = append(trail, "<"+name)
			return out, err
		}
	}
	r := NewRegistry()
	r.Use(mw("outer"), mw("inner"))
	_ = r.Register("t", Func(func(context.Context, Request) (json.RawMessage, error) {
		trail = append(trail, "handler")
		return json.RawMessage(`1`), nil
	}))
	r.Use(func(ctx context.Context, req Request, next Func) (json.RawMessage, error) {
		out, err := next(ctx, req)
		return append(out, '0'), err // "1" becomes "10"
	})
	h, err := r.Lookup("t")
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Handle(context.Background(), Request{ID: "x"})
	if err != nil || string(out) != "10" {
		t.Fatalf("out %s err %v", out, err)
	}
	if got := strings.Join(trail, " "); got != "outer> inner> handler <inner <outer" {
		t.Fatalf("order: %s", got)
	}
}

func TestOutcomes(t *testing.T) {
	base := errors.New("gone")
	for _, c := range []struct {
		name      string
		err       error
		retriable bool
		cancel    bool
		snooze    time.Duration
	}{
		{"plain", base, true, false, 0},
		{"permanent", Permanent(base), false, false, 0},
		{"cancel", Cancel(base), false, true, 0},
		{"cancel nil", Cancel(nil), false, true, 0},
		{"snooze", Snooze(5 * time.Second), true, false, 5 * time.Second},
		{"snooze short", Snooze(time.Millisecond), true, false, time.Second},
		{"snooze long", Snooze(100 * time.Hour), true, false, MaxSnooze},
	} {
		t.Run(c.name, func(t *testing.T) {
			if Retriable(c.err) != c.retriable || errors.Is(c.err, ErrCancel) != c.cancel {
				t.Fatalf("retriable %v cancel %v", Retriable(c.err), errors.Is(c.err, ErrCancel))
			}
			d, ok := SnoozeOf(c.err)
			if ok != (c.snooze > 0) || d != c.snooze {
				t.Fatalf("SnoozeOf = %v %v, want %v", d, ok, c.snooze)
			}
			if c.name == "cancel" && !errors.Is(c.err, base) {
				t.Fatal("Cancel hides the cause")
			}
		})
	}
}
