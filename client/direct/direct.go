// Package direct is the old producer for code that runs inside AWS next to
// the dispatcher.
//
// Deprecated: use package github.com/triagehq/triage/direct, a transport
// for triage.NewClient with every method of the HTTP client:
// triage.NewClient(tr) where tr, err := direct.New(ctx, awsCfg, prefix).
// This package is a thin wrapper over it, kept for compatibility; unlike
// its first version it applies the API's queue-depth backpressure, as its
// documentation always said it behaved exactly like the API's submit.
package direct

//lint:file-ignore SA1019 this deprecated wrapper builds on the deprecated client package on purpose

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/client"
	triagedirect "github.com/triagehq/triage/direct"
)

// Producer submits tasks through the direct transport.
//
// Deprecated: use triage.NewClient with the transport of package
// github.com/triagehq/triage/direct.
type Producer struct {
	t *triagedirect.Transport
}

// Option configures New.
//
// Deprecated: use the options of package github.com/triagehq/triage/direct.
type Option = triagedirect.Option

// WithTable names the task table when it does not follow the prefix.
//
// Deprecated: use direct.WithTable of package github.com/triagehq/triage/direct.
func WithTable(name string) Option { return triagedirect.WithTable(name) }

// WithQueueURL gives a priority's queue URL ("high", "medium" or "low");
// New reports an unknown priority.
//
// Deprecated: use direct.WithQueueURL of package github.com/triagehq/triage/direct.
func WithQueueURL(priority, url string) Option {
	return triagedirect.WithQueueURL(triage.Priority(priority), url)
}

// New returns a producer for the deployment whose resources are named
// from prefix.
//
// Deprecated: use direct.New of package github.com/triagehq/triage/direct.
func New(ctx context.Context, awsCfg aws.Config, prefix string, opts ...Option) (*Producer, error) {
	t, err := triagedirect.New(ctx, awsCfg, prefix, opts...)
	if err != nil {
		return nil, err
	}
	return &Producer{t: t}, nil
}

// Submit validates r, records the task and sends its message; created is
// false when r's idempotency key was used within 24 h.
//
// Deprecated: use triage.Client.Submit.
func (d *Producer) Submit(ctx context.Context, r client.SubmitRequest) (*client.Task, bool, error) {
	return d.t.Submit(ctx, r)
}
