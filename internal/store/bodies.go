package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/triagehq/triage/internal/blob"
	"github.com/triagehq/triage/internal/task"
)

// InlineMax is the largest payload, and the largest result, kept on the
// task's item; larger ones are written once to the blob store (S3) and the
// item keeps a reference.
//
// Why 3 KiB: on the item, every byte is paid for on each of the at least
// three writes of a task's life (DynamoDB bills a write by the whole item,
// in 1 KB units, at $0.625 per million), about 3 × $0.625 = $1.9 per
// million tasks per KB. As an object it costs one PUT ($5 per million)
// and one GET per attempt ($0.40 per million), whatever its size. The two
// cross near 3 KB: below it, inline is cheaper; above it, S3 is, and the
// gap grows with the size (a 200 KB payload inline would cost about 600
// write units a task; as an object, none). An item with both a payload and
// a result at the limit is still far below DynamoDB's 400 KB.
const InlineMax = 3 << 10

// Blobs is the part of the blob store the task store uses.
type Blobs interface {
	Put(ctx context.Context, key string, data []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, keys ...string) error
}

// WithBlobs sets where payloads and results over InlineMax are kept.
// Without it everything stays on the item, up to DynamoDB's item limit
// (ErrItemTooLarge past it).
func WithBlobs(b Blobs) Option { return func(s *Store) { s.blobs = b } }

// offloadPayload writes t's payload to the blob store when it is over
// InlineMax, before the item that references it exists.
func (s *Store) offloadPayload(ctx context.Context, t *task.Task) error {
	if s.blobs == nil || t.PayloadRef != "" || len(t.Payload) <= InlineMax {
		return nil
	}
	key := blob.PayloadKey(t.ID)
	if err := s.blobs.Put(ctx, key, t.Payload); err != nil {
		return fmt.Errorf("store payload of task %s: %w", t.ID, err)
	}
	t.PayloadRef, t.PayloadSize = key, len(t.Payload)
	return nil
}

// offloadResult writes next's new result to the blob store when it is over
// InlineMax, under a key of next's version, and returns the key written
// ("" if none) so a refused write can remove it again.
func (s *Store) offloadResult(ctx context.Context, next *task.Task) (string, error) {
	if s.blobs == nil || next.ResultRef != "" || len(next.Result) <= InlineMax {
		return "", nil
	}
	key := blob.ResultKey(next.ID, next.Version)
	if err := s.blobs.Put(ctx, key, next.Result); err != nil {
		return "", fmt.Errorf("store result of task %s: %w", next.ID, err)
	}
	next.ResultRef, next.ResultSize = key, len(next.Result)
	return key, nil
}

// Payload returns t's payload, reading it from the blob store when it is
// kept there.
func (s *Store) Payload(ctx context.Context, t *task.Task) (json.RawMessage, error) {
	if t.PayloadRef == "" || len(t.Payload) > 0 {
		return t.Payload, nil
	}
	return s.body(ctx, t.ID, t.PayloadRef)
}

// LoadBodies fills in t's payload and result where they are kept in the
// blob store (GET of one task shows them; list pages do not load them).
func (s *Store) LoadBodies(ctx context.Context, t *task.Task) error {
	var err error
	if t.Payload, err = s.Payload(ctx, t); err != nil {
		return err
	}
	if t.ResultRef != "" && len(t.Result) == 0 {
		t.Result, err = s.body(ctx, t.ID, t.ResultRef)
	}
	return err
}

func (s *Store) body(ctx context.Context, id, key string) ([]byte, error) {
	if s.blobs == nil {
		return nil, fmt.Errorf("task %s keeps %s in a blob store, and none is configured", id, key)
	}
	data, err := s.blobs.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	return data, nil
}

// BlobKeys are the blob store objects t references (deleted with its item).
func BlobKeys(t *task.Task) []string {
	var keys []string
	for _, k := range []string{t.PayloadRef, t.ResultRef} {
		if k != "" {
			keys = append(keys, k)
		}
	}
	for _, st := range t.Steps {
		if st.ResultRef != "" {
			keys = append(keys, st.ResultRef)
		}
	}
	return keys
}
