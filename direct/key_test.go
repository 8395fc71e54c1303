package direct_test

import (
	"errors"
	"testing"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/direct"
	"github.com/triagehq/triage/internal/emulators/stacktest"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/triageconfig"
)

// A key given through the direct transport is stored and shown; a bad one
// is refused naming the field "key", as the HTTP API does, with nothing sent.
func TestDirectSubmitKey(t *testing.T) {
	env := stacktest.New(t)
	c := ctx(t)
	tr, err := direct.New(c, env.AWS, direct.Options{Config: &triageconfig.Config{Prefix: env.Prefix}})
	if err != nil {
		t.Fatal(err)
	}
	cl := triage.NewClient(tr)
	tk, _, err := cl.Submit(c, "echo", nil, triage.WithKey("tenant-7"))
	if err != nil || tk.Key != "tenant-7" {
		t.Fatalf("Submit with key = %+v, %v", tk, err)
	}
	rec, err := store.New(env.DynamoDB, env.Spec.Table.Name).Get(c, tk.ID)
	if err != nil || rec.Key != "tenant-7" || rec.FairKey() != "tenant-7" {
		t.Fatalf("stored %+v, %v", rec, err)
	}
	plain, _, err := cl.Submit(c, "echo", nil)
	if err != nil || plain.Key != "" {
		t.Fatalf("Submit without key = %+v, %v", plain, err)
	}
	_, _, err = cl.Submit(c, "echo", nil, triage.WithKey("a#b"))
	var te *triage.Error
	if !errors.As(err, &te) || te.Status != 400 || te.Field != "key" {
		t.Fatalf("bad key: %v, want a 400 naming key", err)
	}
}
