package queue

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxGroupID is the longest MessageGroupId SQS takes.
const MaxGroupID = 128

// GroupID is the SQS MessageGroupId of a task's messages: its fairness key
// (task.FairKey). On a standard queue a group id turns on SQS fair queues
// (since July 2025): when one group holds a large share of the messages in
// flight, SQS serves the other groups' messages first, so a flooding
// tenant does not make a quiet one wait behind its backlog. SQS takes 1 to
// 128 characters of alphanumerics and ASCII punctuation; a key with any
// other character (a space, non-ASCII UTF-8, which task keys allow) is
// sent as "h-" and 40 hex digits of its SHA-256 instead, so every message
// of one key still has one group and different keys almost surely differ.
func GroupID(key string) string {
	if key != "" && len(key) <= MaxGroupID && groupSafe(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "h-" + hex.EncodeToString(sum[:20])
}

func groupSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < '!' || c > '~' {
			return false
		}
	}
	return true
}
