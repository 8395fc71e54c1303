package task

import "unicode/utf8"

// Bounds on the text a task records about its failures. Handler errors are
// free-form and can be arbitrarily long; capping them keeps a task's item
// (which holds up to MaxHistory of them) far below DynamoDB's item limit.
const (
	MaxErrorBytes        = 4096 // task.Error.Message
	MaxAttemptErrorBytes = 1024 // Attempt.Error, one per history entry
)

// Truncate cuts s to at most n bytes without splitting a UTF-8 character,
// marking the cut with "…" (counted in n).
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	if n <= len(mark) {
		return ""
	}
	s = s[:n-len(mark)]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + mark
}
