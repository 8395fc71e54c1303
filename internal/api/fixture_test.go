package api_test

import (
	"os"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

type eventV2 struct {
	events.APIGatewayV2HTTPRequest
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
