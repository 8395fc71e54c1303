package direct

import (
	"context"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/stats"
)

// Workers implements triage.Transport.
func (d *Transport) Workers(ctx context.Context) (*triage.WorkerList, error) {
	ws, err := d.workers.List(ctx)
	if err != nil {
		return nil, internal("list workers", err)
	}
	if ws == nil {
		ws = []triage.Worker{}
	}
	return &triage.WorkerList{Workers: ws, GeneratedAt: d.store.Now().UTC()}, nil
}

// withWorkers adds the workers and keys sections to st, as the API's
// /stats does.
func (d *Transport) withWorkers(ctx context.Context, st *triage.Stats) error {
	var keyed stats.Keyed
	if d.controls != nil {
		keyed = d.controls
	}
	ws, ks, err := stats.CollectFleet(ctx, d.workers, keyed)
	if err != nil {
		return err
	}
	st.Workers, st.Keys = ws, ks
	return nil
}
