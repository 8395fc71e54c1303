package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/store"
)

func TestTokens(t *testing.T) {
	env := stacktest.New(t)
	ctx := context.Background()
	s := store.New(env.DynamoDB, env.Spec.Table.Name)

	if toks, err := s.Tokens(ctx); err != nil || len(toks) != 0 {
		t.Fatalf("Tokens on a new table = %v, %v", toks, err)
	}
	created := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	ci := store.APIToken{Name: "ci.deploy", Hash: auth.Hash("secret-ci"), Scopes: []string{"submit", "read"}, CreatedAt: created}
	if err := s.CreateToken(ctx, ci); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateToken(ctx, store.APIToken{Name: "ops", Hash: auth.Hash("secret-ops"), Scopes: []string{"admin"}}); err != nil {
		t.Fatal(err)
	}
	dup := store.APIToken{Name: "ops", Hash: auth.Hash("other"), Scopes: []string{"read"}}
	if err := s.CreateToken(ctx, dup); !errors.Is(err, store.ErrTokenExists) {
		t.Fatalf("second token named ops: err = %v, want ErrTokenExists", err)
	}
	toks, err := s.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 2 || toks[0].Name != "ci.deploy" || toks[1].Name != "ops" {
		t.Fatalf("Tokens = %+v", toks)
	}
	if got := toks[0]; got.Hash != ci.Hash || !slices.Equal(got.Scopes, ci.Scopes) || !got.CreatedAt.Equal(created) {
		t.Errorf("ci.deploy kept as %+v, want %+v", got, ci)
	}
	if toks[1].Hash != auth.Hash("secret-ops") || toks[1].CreatedAt.IsZero() {
		t.Errorf("ops kept as %+v (the duplicate must not replace it)", toks[1])
	}

	if err := s.RevokeToken(ctx, "ops"); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, "ops"); !errors.Is(err, store.ErrTokenNotFound) {
		t.Fatalf("revoke twice: err = %v, want ErrTokenNotFound", err)
	}
	if toks, _ := s.Tokens(ctx); len(toks) != 1 || toks[0].Name != "ci.deploy" {
		t.Fatalf("after revoke: %+v", toks)
	}
	// The name is free again.
	if err := s.CreateToken(ctx, dup); err != nil {
		t.Fatalf("recreate ops after revoke: %v", err)
	}

	for _, bad := range []store.APIToken{
		{Name: "", Hash: auth.Hash("x"), Scopes: []string{"read"}},
		{Name: "has space", Hash: auth.Hash("x"), Scopes: []string{"read"}},
		{Name: "plain", Hash: "secret-in-clear", Scopes: []string{"read"}},
		{Name: "noscope", Hash: auth.Hash("x")},
	} {
		if err := s.CreateToken(ctx, bad); err == nil {
			t.Errorf("CreateToken(%+v) succeeded", bad)
		}
	}
}

func TestTokensCap(t *testing.T) {
	env := stacktest.New(t)
	ctx := context.Background()
	s := store.New(env.DynamoDB, env.Spec.Table.Name)
	for i := range store.MaxAPITokens {
		name := fmt.Sprintf("t%03d", i)
		if err := s.CreateToken(ctx, store.APIToken{Name: name, Hash: auth.Hash(name), Scopes: []string{"read"}}); err != nil {
			t.Fatalf("token %d: %v", i, err)
		}
	}
	over := store.APIToken{Name: "one-too-many", Hash: auth.Hash("x"), Scopes: []string{"read"}}
	err := s.CreateToken(ctx, over)
	if !errors.Is(err, store.ErrTokensFull) || !strings.Contains(err.Error(), "revoke") {
		t.Fatalf("token %d: err = %v, want ErrTokensFull", store.MaxAPITokens+1, err)
	}
	// A taken name is reported as taken even when full.
	if err := s.CreateToken(ctx, store.APIToken{Name: "t000", Hash: auth.Hash("y"), Scopes: []string{"read"}}); !errors.Is(err, store.ErrTokenExists) {
		t.Fatalf("taken name when full: err = %v, want ErrTokenExists", err)
	}
	if err := s.RevokeToken(ctx, "t042"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateToken(ctx, over); err != nil {
		t.Fatalf("after a revoke there is room: %v", err)
	}
	if toks, err := s.Tokens(ctx); err != nil || len(toks) != store.MaxAPITokens {
		t.Fatalf("Tokens = %d, %v; want %d", len(toks), err, store.MaxAPITokens)
	}
}
