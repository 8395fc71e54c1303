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

// itemSize is an item's size as DynamoDB bills and limits it: each
// attribute's name plus its value (strings and binaries by length, numbers
// by about one byte per two digits, nested maps and lists with 3 bytes of
// overhead and a byte per element). It may overcount numbers slightly, never
// strings, which are what can make an item large.
func itemSize(av map[string]types.AttributeValue) int {
	n := 0
	for k, v := range av {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return (len(v.Value)+1)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberM:
		return 3 + itemSize(v.Value)
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += (len(s)+1)/2 + 1
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	}
	return 0
}

// checkSize refuses an item over MaxItemBytes before DynamoDB does, so the
// caller learns why in terms it can act on.
func checkSize(id string, av map[string]types.AttributeValue) error {
	if n := itemSize(av); n > MaxItemBytes {
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
