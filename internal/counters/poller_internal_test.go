package counters

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// flakyTables fails DescribeTable fails times, then describes a table
// with no stream; at call cancelAt, if set, it calls cancel.
type flakyTables struct {
	fails, calls, cancelAt int
	cancel                 func()
}

func (f *flakyTables) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	f.calls++
	if f.calls == f.cancelAt {
		f.cancel()
	}
	if f.calls <= f.fails {
		return nil, errors.New("connection reset")
	}
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{}}, nil
}

// A Poller that cannot describe its table at first keeps trying (it must
// not leave the counters and events still for good), and stops only for
// what retrying cannot fix (here: a table without a stream) or its
// context's end.
func TestPollerRetriesFindingItsStream(t *testing.T) {
	tables := &flakyTables{fails: 3}
	p := &Poller{Keeper: &Keeper{table: "t"}, Tables: tables, Every: time.Millisecond}
	err := p.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "has no stream") || tables.calls != 4 {
		t.Fatalf("Run = %v after %d DescribeTable calls; want the no-stream error after 4", err, tables.calls)
	}

	// The context ends once the poller has been refused twice: no clock
	// decides how many tries fit.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tables = &flakyTables{fails: 1 << 30, cancelAt: 2, cancel: cancel}
	p = &Poller{Keeper: &Keeper{table: "t"}, Tables: tables, Every: time.Millisecond}
	if err := p.Run(ctx); err == nil || tables.calls < 2 {
		t.Fatalf("Run = %v after %d calls; want it to retry until its context ended, then fail", err, tables.calls)
	}
}
