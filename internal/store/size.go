package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// MaxItemBytes is DynamoDB's item size limit (400 KB: names and values together).
const MaxItemBytes = 400 * 1024

// ErrItemTooLarge means a write would make a task's item larger than
// MaxItemBytes. Nothing was written. It is not a conflict and not worth
// retrying: the same write is just as large the next time.
var ErrItemTooLarge = errors.New("task record over DynamoDB's 400 KB item limit")

// ItemTooLargeError says how large the refused item would have been.
type ItemTooLargeError struct {
	ID   string
	Size int // bytes, as DynamoDB counts them (0 when only DynamoDB knew)
}

func (e *ItemTooLargeError) Error() string {
	if e.Size == 0 {
		return fmt.Sprintf("task %s: %v", e.ID, ErrItemTooLarge)
	}
	return fmt.Sprintf("task %s: the record would be %d bytes: %v", e.ID, e.Size, ErrItemTooLarge)
}

// Unwrap lets errors.Is match ErrItemTooLarge.
func (e *ItemTooLargeError) Unwrap() error { return ErrItemTooLarge }

// ItemSize is an item's size as DynamoDB bills and limits it: each
// attribute's name plus its value (strings and binaries by length, numbers
// by about one byte per two significant digits plus one, maps and lists 3
// bytes plus a byte per element). The bench sizes its capacity estimates
// with it too.
func ItemSize(av map[string]types.AttributeValue) int {
	n := 0
	for k, v := range av {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return numberSize(x.Value)
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		return sum(x.Value, func(s string) int { return len(s) })
	case *types.AttributeValueMemberNS:
		return sum(x.Value, numberSize)
	case *types.AttributeValueMemberBS:
		return sum(x.Value, func(b []byte) int { return len(b) })
	case *types.AttributeValueMemberL:
		return 3 + sum(x.Value, func(e types.AttributeValue) int { return 1 + valueSize(e) })
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range x.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

func sum[T any](xs []T, size func(T) int) int {
	n := 0
	for _, x := range xs {
		n += size(x)
	}
	return n
}

func numberSize(s string) int {
	digits := 0
	for _, r := range s {
		if r >= '0' && r <= '9' {
			digits++
		}
	}
	return (digits+1)/2 + 1
}

// checkSize refuses an item over MaxItemBytes before DynamoDB does, so the
// caller learns why in terms it can act on.
func checkSize(id string, av map[string]types.AttributeValue) error {
	if n := ItemSize(av); n > MaxItemBytes {
		return &ItemTooLargeError{ID: id, Size: n}
	}
	return nil
}

// isSizeLimit reports whether DynamoDB refused a write for the item size
// limit (a ValidationException; the estimate in checkSize may run a little
// under DynamoDB's own count).
func isSizeLimit(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" &&
		strings.Contains(strings.ToLower(ae.ErrorMessage()), "item size")
}
